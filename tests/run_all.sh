#!/usr/bin/env bash
# Runs every suite and ends with the one summary line CI reads:
#   build/     (gcc, optimised):        every suite registered (unit, server, fuse, interop,
#                                       stress, kernel, bench, package)
#   build-san/ (clang, ASan + UBSan):   unit, server, fuzz (FUZZ_SECONDS each)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SAN=${SAN:-build-san}
rm -f "$BUILD/meson-logs/testlog.junit.xml" "$SAN/meson-logs/testlog.junit.xml"
meson test -C "$BUILD" --print-errorlogs --num-processes 2
meson test -C "$SAN" --suite unit --suite server --suite fuzz --print-errorlogs --num-processes 2
echo
python3 tests/summary.py "$BUILD/meson-logs/testlog.junit.xml" "$SAN/meson-logs/testlog.junit.xml"
