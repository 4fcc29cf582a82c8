#!/usr/bin/env bash
# Two nfsrdma-server builds in one run, for a before/after table: 4 KiB
# random reads and writes at iodepth 32 through fio --ioengine=nfsrdma, over
# RPC-RDMA and TCP, each cell run against BASE then NEW, ROUNDS times over, on
# the same export file. Prints each run and the medians with NEW / BASE (runs
# of a few seconds are noise on a shared machine: keep SECS and ROUNDS up).
#   bench/server_ab.sh BASE_SERVER NEW_SERVER [build-dir]   ROUNDS=3 SECS=8 PROVIDER=tcp
# BASE_SERVER: e.g. a server built from an earlier commit (git worktree add).
set -euo pipefail
usage() { sed -n '2,8s/^# \{0,1\}//p' "$0"; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
BASE=$1 NEW=$2 BUILD=${3:-build}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-8} PROVIDER=${PROVIDER:-tcp}
ENGINE=$BUILD/fio-engine/nfsrdma.so
for f in "$BASE" "$NEW" "$ENGINE"; do [ -x "$f" ] || [ -f "$f" ] || { echo "server_ab: $f not found"; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "server_ab: needs root (nfsrdma-server)"; exit 1; }
WORK=$(mktemp -d /var/tmp/nfsrdma-ab-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$WORK/export"
head -c 256M /dev/urandom >"$WORK/export/data"

run() {  # server transport rw -> IOPS
  local nfs mnt rdma pid out
  nfs=$(port) mnt=$(port) rdma=$(port)
  "$1" --export "$WORK/export 127.0.0.1(rw,no_root_squash)" --bind 127.0.0.1 --port "$nfs" --mount-port "$mnt" \
    --rdma-port "$rdma" --provider "$PROVIDER" --no-register --state-dir "$WORK/state" --log-level warn &
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$nfs") 2>/dev/null && break; sleep 0.05; done
  out=$(fio --name=ab --ioengine="external:$ENGINE" --nfs_export="127.0.0.1:$WORK/export" --nfs_transport="$2" \
    --nfs_port="$([ "$2" = rdma ] && echo "$rdma" || echo "$nfs")" --nfs_mount_port="$mnt" --nfs_provider="$PROVIDER" \
    --filename=data --size=256M --rw="$3" --bs=4k --iodepth=32 --time_based --runtime="$SECS" --ramp_time=1 \
    --output-format=json) || out=
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c 'import json, sys; j = json.loads(sys.argv[1])["jobs"][0]; print(int(j["read"]["iops"] + j["write"]["iops"]))' \
    "$out" 2>/dev/null || echo 0
}

for r in $(seq "$ROUNDS"); do
  for t in rdma tcp; do
    for rw in randread randwrite; do
      for who in base new; do
        iops=$(run "$([ $who = base ] && echo "$BASE" || echo "$NEW")" "$t" "$rw")
        echo "$r $t $rw $who $iops" | tee -a "$WORK/runs"
      done
    done
  done
done
python3 - "$WORK/runs" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, t, rw, who, iops = line.split()
    runs[(t, rw, who)].append(int(iops))
print(f"{'4 KiB QD32':<20}{'base IOPS':>12}{'new IOPS':>12}{'new/base':>10}")
for t in ("rdma", "tcp"):
    for rw in ("randread", "randwrite"):
        b, n = statistics.median(runs[(t, rw, "base")]), statistics.median(runs[(t, rw, "new")])
        print(f"{t + ' ' + rw:<20}{b:>12.0f}{n:>12.0f}{(n / b if b else 0):>10.2f}")
EOF
