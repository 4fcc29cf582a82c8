#!/usr/bin/env bash
# The Debian package as a lab meets it: build it from this tree
# (dpkg-buildpackage, as `make deb`), install it with apt, start the server
# the way its systemd unit says (systemd is not PID 1 here, so the unit's own
# ExecStart and ExecReload lines run by hand: that is the stand-in), serve an
# export listed in /etc/nfsrdma/exports, mount it from an fstab line through
# mount -t fuse.nfsrdma, run the fio engine by its bare name, read the man
# pages, check the unit and an fstab mount unit with systemd-analyze verify;
# then purge and find nothing of the package left. All of it in a private
# network namespace, on the unit's default ports.
set -euo pipefail
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$WORK/server.log" ] && tail -30 "$WORK/server.log"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (apt, mount, network namespaces)"
for t in dpkg-buildpackage dh apt-get systemd-analyze man ip fio rsync; do
  command -v "$t" >/dev/null || skip "$t is not installed (make deps installs it)"
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if dpkg-query -W -f='${Status}' nfsrdma 2>/dev/null | grep -q 'ok installed'; then
  skip "the nfsrdma package is installed here already; this test would remove it"
fi
WORK=$(mktemp -d /tmp/nfsrdma-deb-XXXXXX)
NS=nfsrdma-deb-$$
cleanup() {
  set +e
  ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null
  sleep 0.5
  ip netns del "$NS" 2>/dev/null
  dpkg-query -W nfsrdma >/dev/null 2>&1 && apt-get purge -y -qq nfsrdma >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# 1. Build, from a copy of the tree (the package lands next to it).
mkdir "$WORK/src"
(cd "$SRC" && git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$WORK/src/")
[ -d "$SRC/.deps" ] && ln -s "$SRC/.deps" "$WORK/src/.deps"
(cd "$WORK/src" && DEB_BUILD_OPTIONS=parallel=2 dpkg-buildpackage -b -us -uc >"$WORK/build.log" 2>&1) ||
  { tail -30 "$WORK/build.log"; fail "dpkg-buildpackage"; }
DEB=$(ls "$WORK"/nfsrdma_*.deb)
grep -Eq "ninja -j ?2 .*nfsrdma-server" "$WORK/build.log" || fail "DEB_BUILD_OPTIONS=parallel=2 did not reach ninja"
ls "$WORK"/nfsrdma-dbgsym_*.*deb >/dev/null 2>&1 || fail "no nfsrdma-dbgsym package"
grep -q "/usr/lib/debug" <<<"$(dpkg-deb -c "$DEB")" && fail "debug files in the main package: $(dpkg-deb -c "$DEB" | grep /usr/lib/debug)"
echo "ok: built $(basename "$DEB") (ninja -j2, debug symbols in $(basename "$WORK"/nfsrdma-dbgsym_*.*deb))"

# 2. Install with apt, which brings the runtime dependencies.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$DEB" >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; fail "apt-get install"; }
dpkg-query -L nfsrdma | sort >"$WORK/files"
for f in /usr/sbin/nfsrdma-server /usr/bin/nfsrdma-fuse /usr/bin/nfsrdma /usr/bin/nfsrdma-stat \
         /usr/lib/x86_64-linux-gnu/nfsrdma /lib/systemd/system/nfsrdma-server.service /etc/nfsrdma/exports \
         /var/lib/nfsrdma; do
  grep -qx "$f" "$WORK/files" || fail "the package has no $f"
done
/usr/sbin/nfsrdma-server --version | grep -q "^nfsrdma-server " || fail "nfsrdma-server --version"
echo "ok: installed, $(wc -l <"$WORK/files") paths"

# 3. The unit and an fstab mount, as systemd would read them.
UNIT=/lib/systemd/system/nfsrdma-server.service
systemd-analyze verify "$UNIT" || fail "systemd-analyze verify $UNIT"
for doc in nfsrdma-server nfsrdma-fuse nfsrdma-stat nfsrdma-fio; do
  man -w "$doc" >/dev/null || fail "man $doc"
done
grep -q "local_lock" <<<"$(MANWIDTH=80 man nfsrdma-fuse 2>/dev/null)" || fail "man nfsrdma-fuse does not document local_lock"
EXPORT=$WORK/pool
MNT=$WORK/mnt
mkdir -p "$EXPORT" "$MNT" "$WORK/gen"
echo "127.0.0.1:$EXPORT $MNT fuse.nfsrdma proto=rdma,mountport=20048,_netdev 0 0" >"$WORK/fstab"
SYSTEMD_FSTAB=$WORK/fstab /lib/systemd/system-generators/systemd-fstab-generator "$WORK/gen" "$WORK/gen" "$WORK/gen"
MOUNT_UNIT=$(systemd-escape -p --suffix=mount "$MNT")
[ -f "$WORK/gen/$MOUNT_UNIT" ] || fail "systemd-fstab-generator made no $MOUNT_UNIT"
# A network mount: pulled in by remote-fs.target, so after network-online.target (systemd.mount(5)).
[ -L "$WORK/gen/remote-fs.target.requires/$MOUNT_UNIT" ] || fail "$MOUNT_UNIT is not a network mount"
systemd-analyze verify "$WORK/gen/$MOUNT_UNIT" || fail "systemd-analyze verify $MOUNT_UNIT"
echo "ok: systemd-analyze verify: $UNIT and $MOUNT_UNIT (a remote-fs.target mount)"

# 4. Serve and mount, in a namespace of our own (the unit's fixed ports).
exec_start=$(sed -n 's/^ExecStart=//p' "$UNIT")
exec_reload=$(sed -n 's/^ExecReload=//p' "$UNIT")
ip netns add "$NS"
ip -n "$NS" link set lo up
export EXPORT MNT WORK exec_start exec_reload
ip netns exec "$NS" bash -euo pipefail -c '
  fail() { echo "FAIL: $*"; tail -30 "$WORK/server.log"; exit 1; }
  $exec_start >"$WORK/server.log" 2>&1 &
  MAINPID=$!
  for i in $(seq 100); do grep -q "listening: NFSv3 on tcp" "$WORK/server.log" && break; sleep 0.1; done
  grep -q "nothing exported yet" "$WORK/server.log" || fail "the server did not start with the empty exports file"
  echo "$EXPORT 127.0.0.1(rw,no_root_squash)" >>/etc/nfsrdma/exports
  eval "${exec_reload//\$MAINPID/$MAINPID}"
  for i in $(seq 100); do grep -q "exports reloaded" "$WORK/server.log" && break; sleep 0.1; done
  grep -q "exports reloaded: 0 kept, 1 added" "$WORK/server.log" || fail "systemctl reload (ExecReload)"
  mount -T "$WORK/fstab" "$MNT" || fail "mount from the fstab line"
  grep " $MNT fuse.nfsrdma " /proc/self/mounts >/dev/null || fail "not mounted"
  echo "through the package" >"$MNT/hello"
  sync
  [ "$(cat "$EXPORT/hello")" = "through the package" ] || fail "data did not reach the export"
  fio --name=pkg --ioengine=nfsrdma --nfs_export="127.0.0.1:$EXPORT" --nfs_mount_port=20048 --filename=fio.dat \
      --rw=randrw --bs=4k --size=4m --runtime=2 --time_based --output-format=terse >"$WORK/fio.out" 2>&1 ||
    { cat "$WORK/fio.out"; fail "fio --ioengine=nfsrdma"; }
  umount "$MNT"
  kill -TERM $MAINPID
  wait $MAINPID || fail "the server did not stop cleanly on SIGTERM"
'
echo "ok: served from /etc/nfsrdma/exports after a reload, mounted from fstab, fio --ioengine=nfsrdma ran"
ip netns del "$NS"

# 5. Purge: nothing of the package stays.
apt-get purge -y -qq nfsrdma >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; fail "apt-get purge"; }
left=$(while read -r f; do if [ -e "$f" ] && [ ! -d "$f" ]; then echo "$f"; fi; done <"$WORK/files")
[ -z "$left" ] || fail "left behind after purge: $left"
for d in /var/lib/nfsrdma /etc/nfsrdma; do [ ! -e "$d" ] || fail "left behind after purge: $d"; done
echo "ok: purged, nothing left"
