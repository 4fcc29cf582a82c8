#!/usr/bin/env bash
# The server's memory budget under the most the admission lets clients hold:
# four addresses with 64 connections each (the per-address limit), every one
# sending 1 MiB READs and never reading a reply (16 MiB each before the
# budget: 4 GiB in all), and RPC-RDMA clients that never poll, beside two
# well-behaved fio jobs (the fio engine, over RPC-RDMA and over TCP, every
# write read back and verified). Passes when verify passes, what the server
# counts as held never exceeds --max-memory, the budget pushed back (refusals
# counted), and RSS stays under the budget plus what the server had before.
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
command -v curl >/dev/null || skip "curl is not installed"
[ -n "${FIO_ENGINE:-}" ] && [ -f "$FIO_ENGINE" ] || skip "the fio engine is not built"
ABUSER=$(realpath -m "${ABUSER:?set ABUSER to the abuser binary}")
SECONDS_LOADED=$(long 15 120)
# Room for every address at its share (4 abusers and 127.0.0.1's RDMA
# clients and fio jobs, 48 MiB each) beside the shared payload pool (68 MiB),
# with what replies being built overshoot: were the budget full, an abuser
# starting last would wait for room that never comes (as the README says of
# a client coming after four addresses at their share), and its MOUNT and
# LOOKUP time out: CI saw that at 384 MiB.
BUDGET_MIB=448
EXPORT=$WORK/export
mkdir -p "$EXPORT"
head -c 1M /dev/zero >"$EXPORT/target"
MPORT=$(free_port)
RDMA=1 SERVER_EXTRA="--max-memory ${BUDGET_MIB}M --max-memory-per-address 48M --metrics 127.0.0.1:$MPORT --rdma-timeout 2" \
  start_server "$EXPORT 127.0.0.0/8(rw,no_root_squash,insecure)"

good_jobs() {  # SECONDS OUTPUT.json
  GOOD_ARGS=()
  good_job good-rdma rdma 32M "$1"
  good_job good-tcp tcp 32M "$1"
  fio --output-format=json --output="$2" "${GOOD_ARGS[@]}" >"$2.log" 2>&1 || { tail -20 "$2.log"; fail "fio failed"; }
  python3 -c "import json,sys; j=json.load(open('$2')); sys.exit(any(x['error'] for x in j['jobs']))" ||
    fail "fio reported an error (verify included)"
}
cpu_s() { awk '{printf "%.1f\n", ($14 + $15) / 100}' "/proc/$1/stat"; }
held() {  # bytes the server counts as held, over every kind
  curl -sf "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^nfsrdma_server_memory_bytes\{/ {s += $2} END {printf "%d\n", s}'
}

good_jobs 3 "$WORK/warm.json"   # the payload pools and the jobs' own connections, as served unloaded
base_rss=$(rss_kib "$SERVER_PID")
pids=()
for a in 31 32 33 34; do
  "$ABUSER" --kind never-read --connections 64 --source "127.0.0.$a" --port "$NFS_PORT" --mount-port "$MOUNT_PORT" \
    --export "$EXPORT" --file target --seconds $((SECONDS_LOADED + 5)) >"$WORK/abuser-$a.log" 2>&1 &
  pids+=($!)
done
"$ABUSER" --kind rdma-never-read --connections 8 --port "$NFS_PORT" --mount-port "$MOUNT_PORT" --rdma-port "$RDMA_PORT" \
  --export "$EXPORT" --file target --seconds $((SECONDS_LOADED + 5)) >"$WORK/abuser-rdma.log" 2>&1 &
pids+=($!)
on_exit 'kill ${pids[*]} 2>/dev/null'
sleep 3
( while sleep 1; do echo "$(rss_kib "$SERVER_PID") $(held)"; done >"$WORK/samples" ) &
sampler=$!
cpu0=$(cpu_s "$SERVER_PID")
good_jobs "$SECONDS_LOADED" "$WORK/loaded.json"
cpu1=$(cpu_s "$SERVER_PID")
kill "$sampler"
for p in "${pids[@]}"; do wait "$p" || fail "a hostile client could not do its part ($(cat "$WORK"/abuser-*.log | head -3))"; done
kill -0 "$SERVER_PID" || fail "the server died"
peak_rss=$(awk '{print $1}' "$WORK/samples" | sort -n | tail -1)
peak_held=$(awk '{print $2}' "$WORK/samples" | sort -n | tail -1)
refused=$(curl -sf "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^nfsrdma_server_memory_refused_total\{/ {s += $2} END {printf "%d\n", s}')
echo "256 never-reading TCP connections from 4 addresses and 8 never-polling RDMA clients beside 2 verified fio jobs:"
echo "  held at most $((peak_held >> 20)) MiB of a ${BUDGET_MIB} MiB budget; RSS $((base_rss / 1024)) MiB before, peak $((peak_rss / 1024)) MiB; $refused refusals; server CPU $cpu0 -> $cpu1 s over ${SECONDS_LOADED} s"
[ "$peak_held" -le $((BUDGET_MIB << 20)) ] || fail "the server held $peak_held bytes, past its budget"
[ "$refused" -gt 0 ] || fail "the budget never pushed back"
[ "$peak_rss" -lt $((base_rss + BUDGET_MIB * 1024)) ] || fail "RSS reached $peak_rss KiB"
echo "ok: verify passed; held $((peak_held >> 20)) MiB <= ${BUDGET_MIB} MiB; RSS peak $((peak_rss / 1024)) MiB"
