#!/usr/bin/env bash
# The job bench/compare/run.py --preset kernel* runs inside the soft-RoCE guest
# (tools/guest/run.sh boots it): the veth link with an rxe device at each end,
# the kernel's nfsd and nfsrdma-server each exporting a tmpfs, then guest.py
# with the arguments given here. Its results land in $RESULTS.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
# It reconfigures the network: never on a host, only where run.sh left its job.
[ -f "${RESULTS:-/nonexistent}/job.sh" ] || {
  echo "guest.sh: runs inside the soft-RoCE guest only; use bench/compare/run.py --preset kernel" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../tools/guest/lib.sh"
: "${BUILD:?}" "${RESULTS:?}"
rdma_net_up
mkdir -p /srv/kernel /srv/ours /mnt/bench /tmp/state
mount -t tmpfs -o size=1200m tmpfs /srv/kernel
mount -t tmpfs -o size=1200m tmpfs /srv/ours
# 1 MiB transfers on both servers, so the 1 MiB jobs are one call each everywhere.
kernel_nfsd_up /srv/kernel 1048576
ours_up /srv/ours "$RESULTS/server.log" --metrics 127.0.0.1:9464  # guest.py's SERVER_METRICS
export SERVER_IP CLIENT_IP PORT MPORT RPORT
exec python3 "$HERE/guest.py" "$@"
