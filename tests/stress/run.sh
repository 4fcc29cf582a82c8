#!/usr/bin/env bash
# make stress: every fault and load test in its long version (STRESS=1), and
# the random-operation checker with many seeds, one after another, then the
# summary line `N passed, N failed, N skipped`.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(realpath "${1:-build}")
export STRESS=1 NFSRDMA_SERVER=$BUILD/server/nfsrdma-server NFSRDMA_FUSE=$BUILD/client/fuse/nfsrdma-fuse
export FIO_ENGINE=$BUILD/fio-engine/nfsrdma.so ABUSER=$BUILD/tests/abuser
pass=0 failed=0 skipped=0
for t in tests/stress/*_test.sh tests/interop/opcheck_test.sh; do
  name=$(basename "$t" _test.sh)
  start=$SECONDS
  bash "$t"
  rc=$?
  case $rc in
    0) pass=$((pass + 1)); echo "== $name: passed in $((SECONDS - start)) s" ;;
    77) skipped=$((skipped + 1)); echo "== $name: skipped" ;;
    *) failed=$((failed + 1)); echo "== $name: FAILED (exit $rc) after $((SECONDS - start)) s" ;;
  esac
done
echo
echo "$pass passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
