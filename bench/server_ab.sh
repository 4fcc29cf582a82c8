#!/usr/bin/env bash
# Two nfsrdma-server builds in one run, for a before/after table: 4 KiB
# random reads and writes at iodepth 32 through fio --ioengine=nfsrdma, over
# RPC-RDMA and TCP, each cell run against BASE then NEW, ROUNDS times over, on
# the same export file. Prints each run (IOPS, and the server's CPU-µs per
# call) and the medians with NEW / BASE (runs of a few seconds are noise on a
# shared machine: keep SECS and ROUNDS up; CPU per call is the steadier).
#   bench/server_ab.sh BASE_SERVER NEW_SERVER [build-dir]
#     ROUNDS=3 SECS=8 PROVIDER=tcp TRANSPORTS="rdma tcp" RWS="randread randwrite"
# BASE_SERVER: e.g. a server built from an earlier commit (git worktree add).
set -euo pipefail
usage() { sed -n '2,8s/^# \{0,1\}//p' "$0"; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
BASE=$1 NEW=$2 BUILD=${3:-build}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-8} PROVIDER=${PROVIDER:-tcp}
TRANSPORTS=${TRANSPORTS:-rdma tcp} RWS=${RWS:-randread randwrite}
ENGINE=$BUILD/fio-engine/nfsrdma.so
for f in "$BASE" "$NEW" "$ENGINE"; do [ -x "$f" ] || [ -f "$f" ] || { echo "server_ab: $f not found"; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "server_ab: needs root (nfsrdma-server)"; exit 1; }
WORK=$(mktemp -d /var/tmp/nfsrdma-ab-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$WORK/export"
head -c 256M /dev/urandom >"$WORK/export/data"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

run() {  # server transport rw -> "IOPS server-µs-per-call"
  local nfs mnt rdma pid out t0 t1
  nfs=$(port) mnt=$(port) rdma=$(port)
  "$1" --export "$WORK/export 127.0.0.1(rw,no_root_squash)" --bind 127.0.0.1 --port "$nfs" --mount-port "$mnt" \
    --rdma-port "$rdma" --provider "$PROVIDER" --no-register --state-dir "$WORK/state" --log-level warn &
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$nfs") 2>/dev/null && break; sleep 0.05; done
  t0=$(cpu_ticks "$pid")
  out=$(fio --name=ab --ioengine="external:$ENGINE" --nfs_export="127.0.0.1:$WORK/export" --nfs_transport="$2" \
    --nfs_port="$([ "$2" = rdma ] && echo "$rdma" || echo "$nfs")" --nfs_mount_port="$mnt" --nfs_provider="$PROVIDER" \
    --filename=data --size=256M --rw="$3" --bs=4k --iodepth=32 --time_based --runtime="$SECS" \
    --output-format=json) || out=
  t1=$(cpu_ticks "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c '
import json, os, sys
j = json.loads(sys.argv[1])["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
cpu_us = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / os.sysconf("SC_CLK_TCK")
print(int(j["read"]["iops"] + j["write"]["iops"]), f"{cpu_us / ios:.1f}" if ios else 0)' "$out" "$t0" "$t1" 2>/dev/null ||
    echo 0 0
}

for r in $(seq "$ROUNDS"); do
  for t in $TRANSPORTS; do
    for rw in $RWS; do
      for who in base new; do
        res=$(run "$([ $who = base ] && echo "$BASE" || echo "$NEW")" "$t" "$rw")
        echo "$r $t $rw $who $res" | tee -a "$WORK/runs"
      done
    done
  done
done
python3 - "$WORK/runs" <<'EOF'
import collections, statistics, sys
runs, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, t, rw, who, iops, us = line.split()
    runs[(t, rw, who)].append(int(iops))
    cpu[(t, rw, who)].append(float(us))
ratio = lambda n, b: n / b if b else 0
print(f"{'4 KiB QD32':<20}{'base IOPS':>11}{'new IOPS':>10}{'new/base':>10}"
      f"{'base µs/call':>14}{'new µs/call':>13}{'new/base':>10}")
for t, rw in sorted({(t, rw) for t, rw, _ in runs}, reverse=True):
    b, n = statistics.median(runs[(t, rw, "base")]), statistics.median(runs[(t, rw, "new")])
    cb, cn = statistics.median(cpu[(t, rw, "base")]), statistics.median(cpu[(t, rw, "new")])
    print(f"{t + ' ' + rw:<20}{b:>11.0f}{n:>10.0f}{ratio(n, b):>10.2f}{cb:>14.1f}{cn:>13.1f}{ratio(cn, cb):>10.2f}")
EOF
