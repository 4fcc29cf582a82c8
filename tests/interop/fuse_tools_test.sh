#!/usr/bin/env bash
# Ordinary tools inside an nfsrdma-fuse mount over RPC-RDMA (tcp provider):
# cp -a, tar, rsync, git clone and a build, each checked against the source;
# then `mount -t fuse.nfsrdma` and an fstab line, as mount.fuse3 runs us.
. "$(dirname "$0")/common.sh"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
for t in rsync git tar make cc; do command -v $t >/dev/null || skip "$t is not installed"; done

EXPORT=$WORK/export MNT=$WORK/mnt SRC=$WORK/src
mkdir -p "$EXPORT" "$MNT" "$SRC"
# async, as labs often export: the server then runs changes of names and
# attributes on its transport threads (the FUSE suites' exports are sync).
RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash,async)"
OPTS="proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT"

out=$("$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$MNT" -o "$OPTS" 2>&1) || fail "nfsrdma-fuse did not mount: $out"
grep -q " $MNT fuse.nfsrdma " /proc/mounts || fail "no fuse.nfsrdma entry in /proc/mounts"
echo "ok: mounted over rdma"
# Where no syslog daemon listens, the daemon's lines go to a file it names.
if [ ! -S /dev/log ]; then
  grep -q "logging to /var/log/nfsrdma-fuse.log" <<<"$out" || fail "no word of where the log goes: '$out'"
  grep -q "mounted 127.0.0.1:$EXPORT " /var/log/nfsrdma-fuse.log || fail "the mount is not in /var/log/nfsrdma-fuse.log"
  echo "ok: no syslog: logging to /var/log/nfsrdma-fuse.log, and said so"
fi

# As mount.nfs: a second mount on the same mount point is refused, exit 32.
rc=0; out=$("$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$MNT" -o "$OPTS" 2>&1) || rc=$?
[ "$rc" = 32 ] && grep -q "already mounted" <<<"$out" && [ "$(wc -l <<<"$out")" = 1 ] ||
  fail "a second mount on $MNT: status $rc, '$out'"
[ "$(grep -c " $MNT fuse.nfsrdma " /proc/mounts)" = 1 ] || fail "two mounts stacked on $MNT"
echo "ok: a second mount on the same mount point is refused: $out"

# A user other than root: MOUNT comes from a port above 1023, which the
# (default) secure export refuses; the reason names the fix.
if command -v runuser >/dev/null; then
  mkdir -p "$WORK/mnt4" && chmod 777 "$WORK/mnt4" && chmod o+x "$WORK"
  rc=0; out=$(cd / && runuser -u nobody -- "$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$WORK/mnt4" -o "$OPTS,retry=0" 2>&1) || rc=$?
  [ "$rc" = 32 ] && grep -q "(not root): add 'insecure' to the export's options, or mount as root" <<<"$out" ||
    fail "a mount by nobody: status $rc, '$out'"
  echo "ok: a mount by a user other than root names the fix"
fi

# Without mountport= and no portmapper: the reason names both ways out.
if ! (exec 3<>/dev/tcp/127.0.0.1/111) 2>/dev/null; then
  mkdir -p "$WORK/mnt3"
  rc=0; out=$("$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$WORK/mnt3" -o "proto=tcp,retry=0" 2>&1) || rc=$?
  [ "$rc" = 32 ] && grep -q -- "--portmap" <<<"$out" && grep -q "mountport=" <<<"$out" ||
    fail "no portmapper: status $rc, '$out'"
  echo "ok: no portmapper: $out"
fi

# A source tree with the kinds of files tools meet: deep dirs, symlinks, hard
# links, modes, empty and large files.
mkdir -p "$SRC/a/b/c" "$SRC/empty"
head -c $((8 << 20)) /dev/urandom >"$SRC/a/large"
for i in $(seq 1 200); do echo "file $i" >"$SRC/a/b/c/f$i"; done
ln -s ../large "$SRC/a/b/link"
ln "$SRC/a/large" "$SRC/a/hardlink"
chmod 0600 "$SRC/a/b/c/f1"; chmod 0755 "$SRC/a/b/c/f2"; : >"$SRC/zero"
touch -d '2000-01-01 12:00:00' "$SRC/a/b/c/f3"
same_tree() {  # same names, types, modes, sizes, link targets, mtimes and contents
  diff -r --no-dereference "$1" "$2" >/dev/null || return 1
  local a b
  a=$(cd "$1" && find . -printf '%p %y %m %s %l\n' | sort)
  b=$(cd "$2" && find . -printf '%p %y %m %s %l\n' | sort)
  [ "$a" = "$b" ]
}

cp -a "$SRC" "$MNT/cp" && same_tree "$SRC" "$MNT/cp" && same_tree "$SRC" "$EXPORT/cp" || fail "cp -a"
[ "$(stat -c %h "$MNT/cp/a/large")" = 2 ] || fail "cp -a lost the hard link"
echo "ok: cp -a"
mkdir "$MNT/tar" && tar -C "$SRC" -cf - . | tar -C "$MNT/tar" -xf - && same_tree "$SRC" "$MNT/tar" || fail "tar x"
tar -C "$MNT/tar" -cf "$WORK/back.tar" . && mkdir "$WORK/untar" && tar -C "$WORK/untar" -xf "$WORK/back.tar" &&
  same_tree "$SRC" "$WORK/untar" || fail "tar c"
echo "ok: tar in and out"
rsync -aH "$SRC/" "$MNT/rsync/" && same_tree "$SRC" "$MNT/rsync" || fail "rsync -aH"
out=$(rsync -aHi "$SRC/" "$MNT/rsync/") && [ -z "$out" ] || fail "second rsync wanted to change: $out"
echo "ok: rsync, and a second rsync finds nothing to do"

# git: clone a local repository into the mount, commit there, verify.
git init -q "$WORK/repo" && cp -a "$SRC/a/b/c" "$WORK/repo/" &&
  git -C "$WORK/repo" add . && git -C "$WORK/repo" -c user.name=t -c user.email=t@t commit -qm one || fail "git setup"
git clone -q "$WORK/repo" "$MNT/clone" || fail "git clone into the mount"
git -C "$MNT/clone" fsck --full --no-progress 2>/dev/null || fail "git fsck in the mount"
echo changed >>"$MNT/clone/c/f9" && git -C "$MNT/clone" -c user.name=t -c user.email=t@t commit -qam two &&
  [ "$(git -C "$MNT/clone" rev-list --count HEAD)" = 2 ] || fail "git commit in the mount"
echo "ok: git clone, fsck, commit"

# A build: compile and link, with make's timestamps deciding what to rebuild.
mkdir "$MNT/build"
cat >"$MNT/build/main.c" <<'C'
#include <stdio.h>
int twice(int);
int main(void) { printf("%d\n", twice(21)); return 0; }
C
echo 'int twice(int x) { return 2 * x; }' >"$MNT/build/twice.c"
printf 'prog: main.o twice.o\n\tcc -o $@ $^\n%%.o: %%.c\n\tcc -c -o $@ $<\n' >"$MNT/build/Makefile"
make -s -C "$MNT/build" >/dev/null && [ "$("$MNT/build/prog")" = 42 ] || fail "build in the mount"
make -C "$MNT/build" -q prog || fail "make wants to rebuild an up-to-date tree"
echo ok: "a build, and make sees it up to date"

# mount(8) with -t fuse.nfsrdma runs mount.fuse3, which runs `nfsrdma` from a
# fixed PATH; `make install` puts it there. Here a private mount namespace lays
# a directory holding it over /usr/local/sbin, so the host is left untouched.
umount "$MNT" || fail "umount"
grep -q " $MNT " /proc/mounts && fail "still mounted after umount"
mkdir -p "$WORK/bin" "$WORK/mnt2" && ln -s "$NFSRDMA_FUSE" "$WORK/bin/nfsrdma"
echo "127.0.0.1:$EXPORT $WORK/mnt2 fuse.nfsrdma $OPTS,_netdev,nofail 0 0" >"$WORK/fstab"
export EXPORT WORK OPTS SRC
unshare -m --propagation private bash -euc '
  mount --bind "$WORK/bin" /usr/local/sbin
  mount -t fuse.nfsrdma "127.0.0.1:$EXPORT" "$WORK/mnt2" -o "$OPTS"
  diff -r --no-dereference "$SRC" "$WORK/mnt2/cp" >/dev/null
  umount "$WORK/mnt2"
  echo "ok: mount -t fuse.nfsrdma"
  mount -T "$WORK/fstab" "$WORK/mnt2"
  grep -q " $WORK/mnt2 fuse.nfsrdma " /proc/mounts
  umount "$WORK/mnt2"
  echo "ok: mount from an fstab line"' || fail "mount -t fuse.nfsrdma / fstab"
