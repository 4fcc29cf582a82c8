#!/usr/bin/env bash
# make demo: serve a temporary export with nfsrdma-server and measure it.
#
# What exists today is the server over TCP, so the demo copies a file in and
# out through libnfs (nfs-cp, a client nobody here wrote) and compares with
# the same copy done locally (the storage limit). The RPC-over-RDMA transport,
# the FUSE client and the HTML report are their own issues; until they land
# this table is the whole demo.
set -euo pipefail
BUILD=${1:-build}
SIZE_MIB=${DEMO_SIZE_MIB:-256}
SERVER=$BUILD/server/nfsrdma-server
[ "$(id -u)" = 0 ] || { echo "make demo: run as root (the server needs file handles and identities)"; exit 1; }
command -v nfs-cp >/dev/null || { echo "make demo: libnfs-utils missing; run 'make deps'"; exit 1; }

WORK=$(mktemp -d /tmp/nfsrdma-demo-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NFS_PORT=$(port); MOUNT_PORT=$(port); RDMA_PORT=$(port)
mkdir -p "$WORK/export"
"$SERVER" --export "$WORK/export 127.0.0.1(rw,no_root_squash)" --bind 127.0.0.1 --port "$NFS_PORT" \
  --mount-port "$MOUNT_PORT" --rdma-port "$RDMA_PORT" --no-register --state-dir "$WORK/state" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$NFS_PORT") 2>/dev/null && break; sleep 0.05; done
URL="nfs://127.0.0.1$WORK/export/file?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"

echo "nfsrdma demo: ${SIZE_MIB} MiB through nfsrdma-server on 127.0.0.1 (NFSv3 over TCP)"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/src"
sync
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
mibs() { python3 -c "print(f'{$SIZE_MIB / max($1, 1e-9):.0f}')"; }
secs() { python3 -c "import time; print(time.monotonic())"; }
declare -A BW CPU
run() {  # name command...
  local name=$1; shift
  local c0 t0 t1 c1
  c0=$(cpu); t0=$(secs)
  "$@" >/dev/null
  t1=$(secs); c1=$(cpu)
  BW[$name]=$(mibs "$t1 - $t0")
  CPU[$name]=$(python3 -c "print(f'{($c1 - $c0) / $(getconf CLK_TCK) / ($SIZE_MIB / 1024):.2f}')")
}
t0=$(secs); cp "$WORK/src" "$WORK/local-copy"; sync; t1=$(secs); LOCAL_W=$(mibs "$t1 - $t0")
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
t0=$(secs); cat "$WORK/local-copy" >/dev/null; t1=$(secs); LOCAL_R=$(mibs "$t1 - $t0")
run write nfs-cp "$WORK/src" "$URL"
run read nfs-cp "$URL" "$WORK/back"
cmp -s "$WORK/src" "$WORK/back" && cmp -s "$WORK/src" "$WORK/export/file" && SAME=yes || SAME=NO

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
printf '\n%-34s %8s %18s %10s\n' "path" "MiB/s" "server CPU s/GiB" "vs local"
printf '%-34s %8s %18s %10s\n' "local write (cp + sync)" "$LOCAL_W" "-" "1.00"
printf '%-34s %8s %18s %10s\n' "NFS write (nfs-cp -> server)" "${BW[write]}" "${CPU[write]}" "$(ratio "${BW[write]}" "$LOCAL_W")"
printf '%-34s %8s %18s %10s\n' "local read (cold cache)" "$LOCAL_R" "-" "1.00"
printf '%-34s %8s %18s %10s\n' "NFS read (nfs-cp <- server)" "${BW[read]}" "${CPU[read]}" "$(ratio "${BW[read]}" "$LOCAL_R")"
echo
echo "contents identical after the round trip: $SAME"
echo "not yet available: RPC-over-RDMA transport, FUSE mount, fio engine, HTML report (open issues 3-6)"
[ "$SAME" = yes ]
