#!/usr/bin/env bash
# Runs one libFuzzer target for FUZZ_SECONDS (default 20) over a scratch copy of
# its corpus in the repository, so CI runs never modify the tree. `make fuzz`
# sets FUZZ_MERGE=1 to fold new interesting inputs back into the corpus.
set -euo pipefail
bin=$1 corpus=$2
seconds=${FUZZ_SECONDS:-20}
scratch=$(mktemp -d /tmp/nfsrdma-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cp -r "$corpus"/. "$scratch"/
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$scratch" 2>&1 | tail -15
if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  "$bin" -merge=1 "$corpus" "$scratch" 2>&1 | tail -2
fi
