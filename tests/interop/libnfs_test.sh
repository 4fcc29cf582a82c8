#!/usr/bin/env bash
# Interop with a client nobody here wrote: Debian's libnfs-utils against nfsrdma-server.
. "$(dirname "$0")/common.sh"
command -v nfs-cp >/dev/null || skip "libnfs-utils is not installed"

EXPORT=$WORK/export
mkdir -p "$EXPORT/many" "$WORK/closed"
start_server "$EXPORT 127.0.0.1(rw,no_root_squash)" "$WORK/closed 127.0.0.2(rw)"

# 64 MiB in and out, byte-identical.
head -c $((64 << 20)) /dev/urandom >"$WORK/src"
nfs-cp "$WORK/src" "$(url "$EXPORT/copy")" >/dev/null || fail "nfs-cp into the export"
cmp "$WORK/src" "$EXPORT/copy" || fail "file written through NFS differs"
nfs-cp "$(url "$EXPORT/copy")" "$WORK/back" >/dev/null || fail "nfs-cp out of the export"
cmp "$WORK/src" "$WORK/back" || fail "file read through NFS differs"
echo "ok: 64 MiB copied in and out byte-identical"

# A directory of 1,000 entries listed completely.
for i in $(seq 1 1000); do : >"$EXPORT/many/entry-$i"; done
listed=$(nfs-ls "$(url "$EXPORT/many")" | grep -c ' entry-' || true)
[ "$listed" = 1000 ] || fail "nfs-ls listed $listed of 1000 entries"
echo "ok: 1000 entries listed"

# Small reads through nfs-cat.
echo "hello from nfsrdma" >"$EXPORT/greeting"
[ "$(nfs-cat "$(url "$EXPORT/greeting")")" = "hello from nfsrdma" ] || fail "nfs-cat content"
echo "ok: nfs-cat"

# An export this client may not mount is refused.
if nfs-ls "$(url "$WORK/closed")" >"$WORK/refused.out" 2>&1; then fail "mount of a closed export succeeded"; fi
grep -q "MNT3ERR_ACCES\|Permission denied\|ACCES" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "refusal not reported as access denied"; }
grep -q "refused $WORK/closed" "$LOG" || fail "server did not log the refusal"
echo "ok: closed export refused"
