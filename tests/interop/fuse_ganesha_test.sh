#!/usr/bin/env bash
# nfsrdma-fuse against a server nobody here wrote: nfs-ganesha (Debian's, VFS
# FSAL) over TCP, found through its portmapper, in a private network namespace.
# A tree, 256 MiB in and out, rename/link/symlink/chmod/chown/truncate with
# stat checks, 10,000 entries listed, and a non-root user's files.
. "$(dirname "$0")/common.sh"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
for t in ganesha.nfsd rpcbind ip setpriv; do command -v $t >/dev/null || skip "$t is not installed"; done
. "$TESTS_DIR/../tools/ganesha-netns.sh"
NS=nfsrdma-fuse-ganesha-$$
on_exit 'ganesha_netns_stop "$NS"'
export DIR=$WORK/ganesha MNT=$WORK/mnt NFSRDMA_FUSE WORK
mkdir -p "$DIR" "$MNT"
chmod 0755 "$WORK"  # ganesha reaches files by path as the caller
# Made on disk before ganesha ever reads the directory, so its cache agrees.
mkdir "$DIR/many" && (cd "$DIR/many" && seq -f 'entry-%.0f' 1 10000 | xargs touch)
ganesha_netns_start "$NS" "$DIR" "$WORK" || { tail -20 "$WORK/ganesha.log"; fail "nfs-ganesha did not start"; }

# One `ip netns exec` for the whole check: each one has its own mount namespace.
ip netns exec "$NS" bash -euc '
  check() { [ "$1" = "$2" ] || { echo "FAIL: $3: got [$1], want [$2]"; exit 1; }; }
  "$NFSRDMA_FUSE" "127.0.0.1:$DIR" "$MNT" -o proto=tcp
  trap "umount $MNT 2>/dev/null || true" EXIT
  echo "ok: mounted nfs-ganesha over tcp (ports from its portmapper)"

  mkdir -p "$MNT/t/a/b" && echo hello >"$MNT/t/a/b/f"
  check "$(cat "$DIR/t/a/b/f")" hello "file written through the mount"
  head -c $((256 << 20)) /dev/urandom >"$WORK/src"
  cp "$WORK/src" "$MNT/t/big" && cmp -s "$WORK/src" "$DIR/t/big" || { echo "FAIL: 256 MiB in"; exit 1; }
  cp "$MNT/t/big" "$WORK/back" && cmp -s "$WORK/src" "$WORK/back" || { echo "FAIL: 256 MiB out"; exit 1; }
  echo "ok: 256 MiB in and out byte-identical"

  cd "$MNT/t"
  ln a/b/f hard && check "$(stat -c %h a/b/f)" 2 "nlink after link"
  echo old >target && mv hard target && check "$(cat target)" hello "rename over a target"
  check "$(stat -c %h a/b/f)" 2 "nlink after rename"
  rm target && check "$(stat -c %h a/b/f)" 1 "nlink after unlink"
  ln -s a/b/f sym && check "$(readlink sym)" a/b/f "readlink" && check "$(cat sym)" hello "read through symlink"
  chmod 0640 a/b/f && check "$(stat -c %a a/b/f)" 640 "chmod"
  chown 1234:5678 a/b/f && check "$(stat -c %u:%g "$DIR/t/a/b/f")" 1234:5678 "chown"
  truncate -s 2 a/b/f && check "$(stat -c %s a/b/f)" 2 "truncate" && check "$(cat a/b/f)" he "content after truncate"
  cd /
  echo "ok: link, rename, symlink, chmod, chown, truncate"

  check "$(ls "$MNT/many" | wc -l)" 10000 "entries listed"
  check "$(ls "$MNT/many" | sort | uniq | wc -l)" 10000 "distinct entries listed"
  echo "ok: 10000 entries listed"

  mkdir -m 1777 "$MNT/pub" && chmod 1777 "$MNT/pub"
  setpriv --reuid=1000 --regid=1000 --clear-groups bash -c "echo mine >$MNT/pub/u && mkdir $MNT/pub/d"
  check "$(stat -c %u:%g "$DIR/pub/u") $(stat -c %u "$DIR/pub/d")" "1000:1000 1000" "owner of a user'"'"'s files"
  if setpriv --reuid=1001 --regid=1001 --clear-groups rm -f "$MNT/pub/u" 2>/dev/null; then echo "FAIL: sticky bit ignored"; exit 1; fi
  echo "ok: a non-root user'"'"'s files are theirs; the sticky bit holds"
' || fail "nfsrdma-fuse against nfs-ganesha (ganesha log: $(tail -5 "$WORK/ganesha.log"))"
