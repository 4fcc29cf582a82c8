#!/usr/bin/env bash
# Builds fio with its `nfs` engine (libnfs), which Debian's fio package lacks,
# from the same Debian source tree tools/fio-source.sh fetches, into
# .deps/fio-libnfs/fio. The bench harness uses it as a peer client.
# Idempotent. Needs libnfs-dev (make deps installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.deps/fio-libnfs
if [ -x "$out/fio" ] && grep -qw nfs <<<"$("$out/fio" --enghelp 2>/dev/null)"; then realpath "$out/fio"; exit 0; fi
src=$(tools/fio-source.sh)
rm -rf "$out" && cp -a "$src" "$out"
(cd "$out" && make -s clean >/dev/null 2>&1 || true; ./configure --disable-native --enable-libnfs >/dev/null &&
  make -s -j"$(nproc)" fio >/dev/null 2>&1)
grep -qw nfs <<<"$("$out/fio" --enghelp)" || { echo "fio-libnfs: built fio has no nfs engine" >&2; exit 1; }
realpath "$out/fio"
