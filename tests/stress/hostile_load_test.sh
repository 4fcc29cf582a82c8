#!/usr/bin/env bash
# 32 hostile clients (tests/stress/abuser.cpp: idle connections, clients that
# never read their replies over TCP and over RPC-RDMA, one-byte fragments,
# forged log lines, connection floods) beside 4 well-behaved fio jobs (the fio
# engine, 2 over RPC-RDMA and 2 over TCP, every write read back and verified).
# The same jobs run unloaded first, in the same run, as the baseline.
# Passes when verify passes, the loaded jobs keep at least half the unloaded
# throughput, server RSS stays under 320 MiB, and the server's log (info and
# above) grows by at most one line per limited call site per 10 s.
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
[ -n "${FIO_ENGINE:-}" ] && [ -f "$FIO_ENGINE" ] || skip "the fio engine is not built"
ABUSER=$(realpath -m "${ABUSER:?set ABUSER to the abuser binary}")
LOADED=${LOADED:-$(long 20 300)}
UNLOADED=$(long 10 60)
RSS_BOUND_KIB=$((320 * 1024))
EXPORT=$WORK/export
mkdir -p "$EXPORT"
head -c 1M /dev/zero >"$EXPORT/target"
RDMA=1 SERVER_EXTRA="--idle-timeout 5 --rdma-timeout 2" start_server "$EXPORT 127.0.0.0/8(rw,no_root_squash,insecure)"

good_jobs() {  # SECONDS OUTPUT.json
  GOOD_ARGS=()
  local i
  for i in 1 2 3 4; do good_job "good$i" "$([ "$i" -le 2 ] && echo rdma || echo tcp)" 64M "$1"; done
  fio --output-format=json --output="$2" "${GOOD_ARGS[@]}" >"$2.log" 2>&1 || { tail -20 "$2.log"; fail "fio failed"; }
}
# MiB/s written and verified, over every job; fails on any fio error.
throughput() {
  python3 - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
if any(job["error"] for job in j["jobs"]):
    sys.exit("fio reported an error")
print(round(sum((job["write"]["io_bytes"] + job["read"]["io_bytes"]) / (job["job_runtime"] / 1000) for job in j["jobs"]) / 2**20, 1))
PY
}
info_lines() { grep -cE '^[0-9T:.-]+ (info|warning|error|critical)' "$LOG" || true; }

good_jobs "$UNLOADED" "$WORK/unloaded.json"
base=$(throughput "$WORK/unloaded.json") || fail "unloaded run: fio reported an error"

kinds=(idle idle idle idle idle idle idle never-read never-read never-read never-read never-read never-read
       fragments fragments fragments fragments log-forge log-forge log-forge log-forge
       connect-flood connect-flood connect-flood connect-flood connect-flood connect-flood connect-flood connect-flood
       rdma-never-read rdma-never-read rdma-never-read)
[ "${#kinds[@]}" = 32 ] || fail "the mix should have 32 clients"
lines_before=$(info_lines)
pids=()
for i in "${!kinds[@]}"; do
  "$ABUSER" --kind "${kinds[$i]}" --source "127.0.0.$((10 + i))" --port "$NFS_PORT" --mount-port "$MOUNT_PORT" \
    --rdma-port "$RDMA_PORT" --export "$EXPORT" --file target --seconds $((LOADED + 5)) >"$WORK/abuser-$i.log" 2>&1 &
  pids+=($!)
done
on_exit 'kill ${pids[*]} 2>/dev/null'
sleep 2
peak=0
( while sleep 1; do echo "$(rss_kib "$SERVER_PID")"; done >"$WORK/rss" ) &
sampler=$!
good_jobs "$LOADED" "$WORK/loaded.json"
kill "$sampler"
loaded=$(throughput "$WORK/loaded.json") || fail "under load: fio reported an error (verify included)"
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { cat "$WORK/abuser-$i.log"; fail "hostile client $i (${kinds[$i]}) could not do its part"; }
done
kill -0 "$SERVER_PID" || fail "the server died"
peak=$(sort -n "$WORK/rss" | tail -1)
echo "server RSS every 10 s under load (MiB): $(awk 'NR % 10 == 1 {printf "%d ", $1 / 1024}' "$WORK/rss")"
lines=$(( $(info_lines) - lines_before ))
ratio=$(python3 -c "print(round($loaded / $base, 2))")
echo "good jobs: ${base} MiB/s unloaded (${UNLOADED} s), ${loaded} MiB/s beside 32 hostile clients (${LOADED} s): ratio ${ratio}"
echo "server RSS peak under load: $((peak / 1024)) MiB (bound $((RSS_BOUND_KIB / 1024)) MiB); log lines at info and above: ${lines}"
python3 -c "import sys; sys.exit(0 if $loaded >= 0.5 * $base else 1)" ||
  fail "the well-behaved jobs fell below half their unloaded throughput"
[ "$peak" -lt "$RSS_BOUND_KIB" ] || fail "server RSS reached $peak KiB"
# About 20 limited call sites, one line each per 10 s, plus start-up lines.
[ "$lines" -le $(( (LOADED / 10 + 2) * 25 )) ] || fail "the log grew by $lines lines under abuse"
! grep -q '^2026-01-01T00:00:00.000' "$LOG" || fail "a client's text began a line of the log"
echo "ok: verify passed, throughput ratio ${ratio} (>= 0.5), RSS $((peak / 1024)) MiB, ${lines} log lines"
