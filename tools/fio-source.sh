#!/usr/bin/env bash
# Fetches Debian's source of the installed fio into .deps/ and configures it,
# so the fio engine compiles against the very headers of the fio that will
# load it (external engines have no stable ABI). Prints the tree's path.
# Idempotent: an already configured tree of the right version is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=$(fio --version | sed 's/^fio-//')
tree=.deps/fio-$ver
if [ -f "$tree/config-host.h" ]; then realpath "$tree"; exit 0; fi
mkdir -p .deps
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  # Debian's own archive, source packages only.
  cat >/etc/apt/sources.list.d/nfsrdma-src.sources <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "$VERSION_CODENAME")
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -qq >&2
fi
(cd .deps && apt-get source -qq --download-only "fio=$(dpkg-query -W -f='${Version}' fio)" >&2 2>/dev/null ||
  apt-get source -qq --download-only fio >&2)
tar -xzf .deps/fio_"$ver".orig.tar.gz -C .deps
(cd "$tree" && ./configure --disable-native >/dev/null)
realpath "$tree"
