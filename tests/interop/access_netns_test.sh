#!/usr/bin/env bash
# Access control seen from another host: a network namespace joined by a veth
# pair, outside the export's client list. MOUNT refuses it (libnfs, and
# nfsrdma-fuse over rdma and tcp, each say so) and a client on the list is
# served meanwhile. (Every NFS procedure from an outside address with a handle
# an allowed client got, squashing, forged and cross-export handles, `..` and
# read-only exports: tests/server_access_test.cpp and server_procs_test.cpp.)
. "$(dirname "$0")/common.sh"
command -v ip >/dev/null || skip "iproute2 is not installed"
command -v nfs-ls >/dev/null || skip "libnfs-utils is not installed"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
veth_netns acl 215
EXPORT=$WORK/export
mkdir -p "$EXPORT" && echo secret >"$EXPORT/file"
# Only the host's own address on the veth may mount; the namespace's may not.
BIND=$NET.1 RDMA=1 start_server "$EXPORT $NET.1(rw,no_root_squash,insecure)"
in_ns() { ip netns exec "$NS" "$@"; }

url="nfs://$NET.1$EXPORT/file?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"
if in_ns nfs-cat "$url" >"$WORK/libnfs.out" 2>&1; then fail "libnfs read the export from outside the list"; fi
grep -qi "acces\|denied\|permission" "$WORK/libnfs.out" || { cat "$WORK/libnfs.out"; fail "libnfs: refusal not reported"; }
echo "ok: libnfs from the namespace: MOUNT refused"

mkdir -p "$WORK/mnt"
for proto in rdma tcp; do
  port=$([ $proto = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  status=0
  in_ns "$NFSRDMA_FUSE" "$NET.1:$EXPORT" "$WORK/mnt" -o "proto=$proto,provider=tcp,port=$port,mountport=$MOUNT_PORT" \
    2>"$WORK/fuse.err" || status=$?
  [ "$status" = 32 ] && grep -q "access denied by server" "$WORK/fuse.err" ||
    { cat "$WORK/fuse.err"; fail "nfsrdma-fuse over $proto from outside the list: status $status"; }
done
echo "ok: nfsrdma-fuse from the namespace, over rdma and tcp: 'access denied by server', exit 32, nothing mounted"
grep -q "refused $EXPORT" "$LOG" || fail "the server did not log the refusals"

# The host itself is on the list and is served while the namespace is turned away.
[ "$(nfs-cat "nfs://$NET.1$EXPORT/file?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3")" = secret ] ||
  fail "the allowed client was not served"
echo "ok: the allowed client is served"
