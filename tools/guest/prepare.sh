#!/usr/bin/env bash
# Prepares the soft-RoCE guest under BUILD/guest (default build/guest): Debian's
# own 6.1 kernel unpacked from its package (never installed on this host), a
# busybox initramfs that mounts this host's root read-only over 9p under a
# tmpfs overlay, nfs-kernel-server's userland unpacked for the guest only,
# and soft-iWARP (siw.ko), which Debian's kernel does not build, compiled
# from Debian's source of that same kernel against its headers.
# Idempotent: what is already there is reused. Prints the guest directory.
set -euo pipefail
BUILD=$(realpath -m "${1:-build}")
G=$BUILD/guest
mkdir -p "$G"

need=()
for p in qemu-system-x86 busybox-static kmod iproute2 ibverbs-providers ibverbs-utils perftest libfabric-bin nfs-common tshark \
  make gcc-12 xz-utils; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "guest: installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

build_siw() {
  local v src=$G/siw-build abi=${ver%-*} series
  series=$(cut -d. -f1,2 <<<"$ver")
  v=$(cat "$G/kernel/package-version" 2>/dev/null ||
    apt-cache show "linux-image-$ver" | awk '/^Version:/ && !v {v = $2} END {print v}')
  rm -rf "$src" && mkdir -p "$src/dl" "$src/hdr" "$src/siw"
  # linux-kbuild's revisions move apart from the image's (the archive kept
  # 6.1.192-3's alone beside a 6.1.192-2 image): any of the same upstream
  # version builds modules for it, the image's own revision first.
  local kb
  kb=$(apt-cache madison "linux-kbuild-$series" | awk -F' *[|] *' -v v="$v" -v up="${v%-*}-" \
    '$2 == v {print v; f = 1; exit} index($2, up) == 1 && !k {k = $2} END {if (!f && k) print k}')
  [ -n "$kb" ] || { echo "no linux-kbuild-$series of ${v%-*}"; return 1; }
  (cd "$src/dl" && apt-get download -qq "linux-source-$series=$v" "linux-headers-$ver=$v" \
    "linux-headers-$abi-common=$v" "linux-kbuild-$series=$kb") || return 1
  local d
  for d in "$src"/dl/linux-headers-*.deb "$src"/dl/linux-kbuild-*.deb; do dpkg -x "$d" "$src/hdr" || return 1; done
  dpkg-deb --fsys-tarfile "$src"/dl/linux-source-*.deb | tar -xO "./usr/src/linux-source-$series.tar.xz" |
    tar -xJ -C "$src/siw" --strip-components=5 --wildcards "linux-source-$series/drivers/infiniband/sw/siw/*" || return 1
  # The headers' Makefile includes the -common tree by its installed path.
  local kdir=$src/hdr/usr/src/linux-headers-$ver
  sed -i "s|include /usr/src/|include $src/hdr/usr/src/|" "$kdir/Makefile"
  make -C "$kdir" M="$src/siw" CONFIG_RDMA_SIW=m -j"$(nproc)" modules || return 1
  mkdir -p "$(dirname "$siw")" && strip --strip-debug -o "$siw" "$src/siw/siw.ko" && depmod -b "$G/kernel" "$ver" || return 1
  rm -rf "$src"
}

# The kernel Debian 12 ships now (what linux-image-amd64 points at).
if [ ! -f "$G/kernel/version" ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ && !p {p = $2} END {print p}') || pkg=
  [ -n "$pkg" ] || { apt-get update -qq >&2; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ && !p {p = $2} END {print p}'); }
  [ -n "$pkg" ] || { echo "guest: no linux-image-amd64 in the package lists" >&2; exit 1; }
  rm -rf "$G/kernel" "$G/dl" && mkdir -p "$G/dl"
  (cd "$G/dl" && apt-get download -qq "$pkg" 2>/dev/null)
  dpkg -x "$G"/dl/linux-image-*.deb "$G/kernel"
  dpkg-deb -f "$G"/dl/linux-image-*.deb Version >"$G/kernel/package-version"
  ver=${pkg#linux-image-}
  depmod -b "$G/kernel" "$ver"
  rm -rf "$G/dl"
  echo "$ver" >"$G/kernel/version"
fi
ver=$(cat "$G/kernel/version")

# nfs-kernel-server's programs (rpc.nfsd, rpc.mountd, exportfs), for the guest
# only: installing it here would try to start an NFS server on this host.
if [ ! -x "$G/nfsd/usr/sbin/rpc.nfsd" ]; then
  rm -rf "$G/nfsd" "$G/dl" && mkdir -p "$G/dl"
  (cd "$G/dl" && apt-get download -qq nfs-kernel-server 2>/dev/null)
  dpkg -x "$G"/dl/nfs-kernel-server_*.deb "$G/nfsd"
  rm -rf "$G/dl"
fi

# soft-iWARP: Debian's kernel leaves CONFIG_RDMA_SIW unset, so siw.ko is built
# here from the linux-source package of the very version unpacked above, with
# that version's headers (unpacked, not installed), and dropped into the
# guest's module tree (updates/). The kernel loads it unsigned (it is not
# built to require signatures), as it loads any out-of-tree module. Where it
# cannot be built, siw.failed says why and the suite's iWARP cells fail.
siw=$G/kernel/lib/modules/$ver/updates/siw.ko
if [ ! -f "$siw" ]; then
  rm -f "$G/siw.failed"
  if ! out=$(build_siw 2>&1); then
    echo "guest: soft-iWARP could not be built: $(tail -1 <<<"$out")" >&2
    printf '%s\n' "$out" >"$G/siw.failed"
  fi
fi

# The initramfs: busybox, the modules that reach the host's root (virtio PCI,
# 9p, overlay) in load order, and /init.
if [ ! -f "$G/initramfs.cpio.gz" ] || [ "$G/initramfs.cpio.gz" -ot "$(dirname "$0")/init.sh" ]; then
  R=$G/initramfs
  rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,lower,upper,newroot,lib/modules}
  cp /bin/busybox "$R/bin/busybox"
  mdir=$G/kernel/lib/modules/$ver
  : >"$R/modules.list"
  add_module() {  # the module after what it depends on, each once
    local rel=$1 dep
    grep -qxF "$rel" "$R/modules.list" && return 0
    for dep in $(awk -v m="$rel:" '$1 == m {for (i = 2; i <= NF; i++) print $i}' "$mdir/modules.dep"); do
      add_module "$dep"
    done
    mkdir -p "$R/lib/modules/$(dirname "$rel")"
    cp "$mdir/$rel" "$R/lib/modules/$rel"
    echo "$rel" >>"$R/modules.list"
  }
  for m in drivers/virtio/virtio_pci.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko fs/overlayfs/overlay.ko; do
    add_module "kernel/$m"
  done
  cp "$(dirname "$0")/init.sh" "$R/init"
  chmod 0755 "$R/init"
  (cd "$R" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$G/initramfs.cpio.gz"
  rm -rf "$R"
fi
echo "$G"
