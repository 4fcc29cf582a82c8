#!/usr/bin/env bash
# Two builds of the stack in one run, for a before/after table: 4 KiB random
# reads and writes at iodepth 32 (BS, QD and RWS change that) through fio
# --ioengine=nfsrdma, over RPC-RDMA and TCP, each cell run with BASE's server
# and engine then NEW's, ROUNDS times over, on the same export file. Prints each run (IOPS, and CPU-µs per
# call in the server and in fio with the engine) and the medians with
# NEW / BASE (runs of a few seconds are noise on a shared machine: keep SECS
# and ROUNDS up; CPU per call is the steadier figure).
#   bench/ab.sh BASE_BUILD NEW_BUILD
#     ROUNDS=3 SECS=8 PROVIDER=tcp TRANSPORTS="rdma tcp" RWS="randread randwrite" BS=4k QD=32
#     JOBS=1 (fio jobs, each with its own connection; figures are their sum)
#     WORKDIR=/var/tmp
# WORKDIR holds the export (its filesystem matters: a WRITE runs on the
# server's RDMA thread only when a page it writes in part is in the page cache).
# BASE_BUILD: the build directory of an earlier commit (git worktree add,
# meson setup, ninja server/nfsrdma-server fio-engine/nfsrdma.so).
set -euo pipefail
usage() { sed -n '2,16s/^# \{0,1\}//p' "$0"; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -eq 2 ] || { usage >&2; exit 2; }
BASE=$1 NEW=$2
ROUNDS=${ROUNDS:-3} SECS=${SECS:-8} PROVIDER=${PROVIDER:-tcp}
TRANSPORTS=${TRANSPORTS:-rdma tcp} RWS=${RWS:-randread randwrite} BS=${BS:-4k} QD=${QD:-32} JOBS=${JOBS:-1}
for b in "$BASE" "$NEW"; do
  for f in server/nfsrdma-server fio-engine/nfsrdma.so; do
    [ -f "$b/$f" ] || { echo "ab: $b/$f not found"; exit 1; }
  done
done
[ "$(id -u)" = 0 ] || { echo "ab: needs root (nfsrdma-server)"; exit 1; }
WORK=$(mktemp -d "${WORKDIR:-/var/tmp}/nfsrdma-ab-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$WORK/export"
head -c 256M /dev/urandom >"$WORK/export/data"

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

run() {  # build transport rw -> "IOPS server-µs-per-call fio-µs-per-call MiB/s"
  local nfs mnt rdma pid out t0 t1
  nfs=$(port) mnt=$(port) rdma=$(port)
  "$1/server/nfsrdma-server" --export "$WORK/export 127.0.0.1(rw,no_root_squash)" --bind 127.0.0.1 --port "$nfs" \
    --mount-port "$mnt" --rdma-port "$rdma" --provider "$PROVIDER" --no-register --state-dir "$WORK/state" \
    --log-level warn &
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$nfs") 2>/dev/null && break; sleep 0.05; done
  t0=$(cpu_ticks "$pid")
  # fio's own figures count one thread of its job; bash's `time` counts fio
  # and its job process with every thread (the engine's, if it has any).
  out=$( { TIMEFORMAT='%U %S'; time fio --name=ab --ioengine="external:$1/fio-engine/nfsrdma.so" \
    --nfs_export="127.0.0.1:$WORK/export" --nfs_transport="$2" \
    --nfs_port="$([ "$2" = rdma ] && echo "$rdma" || echo "$nfs")" --nfs_mount_port="$mnt" \
    --nfs_provider="$PROVIDER" --filename=data --size=256M --rw="$3" --bs="$BS" --iodepth="$QD" --numjobs="$JOBS" --group_reporting --time_based \
    --runtime="$SECS" --output-format=json --output="$WORK/fio.json" >/dev/null; } 2>&1) || out=
  t1=$(cpu_ticks "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c '
import json, os, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
server_us = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / os.sysconf("SC_CLK_TCK")
fio_us = sum(float(x) for x in sys.argv[4].split()) * 1e6
print(int(j["read"]["iops"] + j["write"]["iops"]), f"{server_us / ios:.1f} {fio_us / ios:.1f}" if ios else "0 0",
      int((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 2**20))' \
    "$WORK/fio.json" "$t0" "$t1" "$out" 2>/dev/null || echo 0 0 0 0
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
python3 - "$WORK/runs" "$BS QD$QD x$JOBS" <<'EOF'
import collections, statistics, sys
cols = ("IOPS", "server µs/call", "fio µs/call", "MiB/s")
short = ("IOPS", "srv µs", "fio µs", "MiB/s")
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, t, rw, who, *values = line.split()
    runs[(t, rw, who)].append([float(v) for v in values])
print(f"{sys.argv[2]}, medians; µs: CPU per call; new/base in the order", ", ".join(cols))
print(f"{'':<16}" + "".join(f"{h + ' ' + w:>14}" for h in short for w in ("base", "new")) + "  new/base")
for t, rw in sorted({(t, rw) for t, rw, _ in runs}, reverse=True):
    med = {who: [statistics.median(v[i] for v in runs[(t, rw, who)]) for i in range(4)] for who in ("base", "new")}
    cells = "".join(f"{med[w][i]:>14.{1 if i in (1, 2) else 0}f}" for i in range(4) for w in ("base", "new"))
    ratios = " ".join(f"{med['new'][i] / med['base'][i]:.2f}" if med["base"][i] else "-" for i in range(4))
    print(f"{t + ' ' + rw:<16}{cells}  {ratios}")
EOF
