#!/usr/bin/env bash
# The `kernel` suite of make test: boots the soft-RoCE guest (run.sh) and runs
# the interop matrix there (kernel_cases.sh), passing its TAP through. Where
# the guest cannot run, one line says why and the suite is skipped.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RIG=$HERE/../../tools/guest  # prepare.sh, run.sh: the soft-RoCE guest
export BUILD=${BUILD_DIR:?set BUILD_DIR to the build directory}
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (QEMU's 9p export of / and apt)"
[ -e /dev/fuse ] || skip "no /dev/fuse"
if ! prep=$("$RIG/prepare.sh" "$BUILD" 2>&1); then
  skip "the guest could not be prepared: $(tail -1 <<<"$prep")"
fi
"$RIG/run.sh" --name kernel --timeout "${KERNEL_SUITE_TIMEOUT:-1500}" "$HERE/kernel_cases.sh"
rc=$?
if [ $rc = 124 ]; then echo "Bail out! the guest ran out of time; see $BUILD/guest/runs/kernel/"; fi
[ -f "$BUILD/guest/runs/kernel/figures.txt" ] && sed 's/^/# /' "$BUILD/guest/runs/kernel/figures.txt"
exit $rc
