#!/usr/bin/env bash
# The same-run comparison script end to end, briefly: every row of the table
# is there (raw RMA, NFS over RPC-RDMA with and without registered buffers,
# NFS over TCP; both ops, both sizes).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
out=$(BENCH_SECONDS=0.3 REPEATS=1 REGION_MIB=8 "$(dirname "$0")/../../bench/transport_compare.sh" "$BUILD_DIR")
echo "$out"
rows=$(grep -cE '^(raw RMA|NFS)' <<<"$out")
[ "$rows" = 16 ] || { echo "FAIL: $rows of 16 rows"; exit 1; }
