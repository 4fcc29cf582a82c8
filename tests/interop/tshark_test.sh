#!/usr/bin/env bash
# tshark decodes a captured session with nfsrdma-server: every packet parses,
# none is malformed, and the procedures we drove are all there.
. "$(dirname "$0")/common.sh"
command -v tshark >/dev/null || skip "tshark is not installed"
command -v nfs-cp >/dev/null || skip "libnfs-utils is not installed"

EXPORT=$WORK/export
mkdir -p "$EXPORT/dir"
start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
PCAP=$WORK/session.pcap
tshark -q -i lo -f "tcp port $NFS_PORT or tcp port $MOUNT_PORT" -w "$PCAP" >"$WORK/tshark.log" 2>&1 &
TSHARK=$!
for _ in $(seq 100); do grep -q "Capturing on" "$WORK/tshark.log" && break; sleep 0.05; done
sleep 0.3

head -c 300000 /dev/urandom >"$WORK/blob"
for i in $(seq 1 50); do : >"$EXPORT/dir/f$i"; done
nfs-cp "$WORK/blob" "$(url "$EXPORT/blob")" >/dev/null
nfs-cp "$(url "$EXPORT/blob")" "$WORK/blob.back" >/dev/null
nfs-ls "$(url "$EXPORT/dir")" >/dev/null
nfs-cat "$(url "$EXPORT/blob")" >/dev/null
nfs-ls "$(url "$EXPORT/missing")" >/dev/null 2>&1 || true
sleep 0.5
kill -INT "$TSHARK"; wait "$TSHARK" || true

decode=(-r "$PCAP" -d "tcp.port==$NFS_PORT,rpc" -d "tcp.port==$MOUNT_PORT,rpc")
total=$(tshark "${decode[@]}" -Y rpc 2>/dev/null | wc -l)
[ "$total" -gt 20 ] || fail "only $total RPC packets captured"
bad=$(tshark "${decode[@]}" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | wc -l)
if [ "$bad" != 0 ]; then
  tshark "${decode[@]}" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | head -20
  fail "$bad malformed or erroneous packets"
fi
procs=$(tshark "${decode[@]}" -Y 'nfs || mount' 2>/dev/null)
for p in "MNT Call" "FSINFO Reply" "LOOKUP Reply" "WRITE Reply" "READ Reply" "READDIRPLUS Reply" "COMMIT Reply" "CREATE Reply"; do
  grep -q "$p" <<<"$procs" || fail "no '$p' in the capture"
done
echo "ok: $total RPC packets decoded, none malformed"
