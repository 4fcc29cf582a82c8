#!/usr/bin/env bash
# The README's first mount, as written, on a fresh pair of hosts: the server
# in a network namespace on its default ports (2049, 20048, 20049), started as
# the README shows, and nfsrdma-fuse here mounting it with no option at all.
# With --portmap the client finds MOUNT and the lock manager through port 111
# and a lock works; without it MOUNT is found on 20048 all the same. Either
# way the transport the client chose is named on its terminal.
. "$(dirname "$0")/common.sh"
command -v ip >/dev/null || skip "iproute2 is not installed"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
veth_netns readme 217
POOL=$WORK/pool MNT=$WORK/mnt
mkdir -p "$POOL" "$MNT" && chmod 1777 "$POOL"  # root is squashed: the README's export is root_squash
on_exit "umount -l '$MNT' 2>/dev/null"

serve() {  # the README's command line, plus a state directory of the test's own
  ip netns exec "$NS" "$NFSRDMA_SERVER" --export "$POOL" --state-dir "$WORK/state" "$@" >"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2049' 2>/dev/null && return; sleep 0.05; done
  fail "the server did not start: $(cat "$LOG")"
}

serve --portmap
rc=0; out=$("$NFSRDMA_FUSE" "$NET.2:$POOL" "$MNT" 2>&1) || rc=$?
[ "$rc" = 0 ] || fail "nfsrdma-fuse $NET.2:$POOL $MNT: status $rc: $out"
grep -q "NFS over TCP (no RDMA device here" <<<"$out" || fail "the transport chosen was not named: '$out'"
echo hello >"$MNT/f" && [ "$(cat "$MNT/f")" = hello ] || fail "write and read back"
flock -n "$MNT/f" true || fail "a lock on the README's mount: $(tail -3 "$LOG")"
umount "$MNT"
echo "ok: server --export --portmap, client with no option: mounted over TCP, data and a lock"

kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
serve
"$NFSRDMA_FUSE" "$NET.2:$POOL" "$MNT" 2>/dev/null || fail "no portmapper: MOUNT not found on 20048"
[ "$(cat "$MNT/f")" = hello ] || fail "read without a portmapper"
umount "$MNT"
echo "ok: server --export alone: MOUNT found on 20048 without a portmapper"
