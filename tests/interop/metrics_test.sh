#!/usr/bin/env bash
# Metrics end to end: nfsrdma-server and an nfsrdma-fuse mount over RPC-RDMA
# serve Prometheus metrics (--metrics); the series count what was done;
# nfsrdma-stat reads them; Debian's Prometheus scrapes both; and the Grafana
# dashboard names only metrics the code exports.
. "$(dirname "$0")/common.sh"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
command -v prometheus >/dev/null || skip "prometheus is not installed"
SRC=$(dirname "$TESTS_DIR")
EXPORT=$WORK/export MNT=$WORK/mnt
mkdir -p "$EXPORT" "$MNT"
SMET=$(free_port) CMET=$(free_port) PROM=$(free_port)
RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true  # again, with metrics
"$NFSRDMA_SERVER" --port "$NFS_PORT" --mount-port "$MOUNT_PORT" --bind 127.0.0.1 --no-register \
  --state-dir "$WORK/state" --rdma-port "$RDMA_PORT" --provider tcp --export "$EXPORT 127.0.0.1(rw,no_root_squash)" \
  --metrics "127.0.0.1:$SMET" >"$LOG" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$NFS_PORT") 2>/dev/null && break; sleep 0.05; done
PROM_PID=
on_exit '[ -n "$PROM_PID" ] && kill "$PROM_PID"'

"$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$MNT" \
  -o "proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT,metrics=127.0.0.1:$CMET" || fail "mount"
# One endpoint per port: a second process asking for it fails (exit 32 for a mount).
mkdir -p "$WORK/mnt2"
rc=0; out=$("$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$WORK/mnt2" \
  -o "proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT,metrics=127.0.0.1:$CMET" 2>&1) || rc=$?
[ "$rc" = 32 ] && grep -q "metrics" <<<"$out" || fail "a second mount on metrics port $CMET: status $rc, '$out'"
rc=0; "$NFSRDMA_SERVER" --port "$(free_port)" --mount-port "$(free_port)" --no-rdma --no-nlm --no-register \
  --state-dir "$WORK/state2" --export "$EXPORT" --metrics "127.0.0.1:$SMET" >"$WORK/server2.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "a second server served metrics port $SMET"
echo "ok: a metrics port in use is refused ($out)"
head -c $((8 << 20)) /dev/urandom >"$MNT/data" && cat "$MNT/data" >/dev/null && ls "$MNT" >/dev/null
cat "$MNT/missing" 2>/dev/null || true
sync "$MNT/data"

curl -sf "http://127.0.0.1:$SMET/metrics" >"$WORK/server.prom" || fail "no server metrics"
curl -sf "http://127.0.0.1:$CMET/metrics" >"$WORK/client.prom" || fail "no client metrics"
value() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
at_least() { v=$(value "$1" "$3"); awk -v v="${v:-0}" -v m="$2" 'BEGIN {exit !(v >= m)}' || fail "$1 is ${v:-missing}, wanted >= $2"; }
at_least 'nfsrdma_server_calls_total{program="NFS",proc="WRITE"}' 8 "$WORK/server.prom"
at_least 'nfsrdma_server_bytes_total{op="write"}' $((8 << 20)) "$WORK/server.prom"
at_least 'nfsrdma_rdma_bytes_total{op="read"}' $((8 << 20)) "$WORK/server.prom"
at_least 'nfsrdma_server_connections{transport="rdma"}' 1 "$WORK/server.prom"
at_least 'nfsrdma_server_rdma_credits_granted' 8 "$WORK/server.prom"  # 8 at first, growing with use
at_least 'nfsrdma_server_memory_limit_bytes' $((256 << 20)) "$WORK/server.prom"
at_least 'nfsrdma_server_memory_bytes{kind="rdma_payload"}' $((64 * 1114112)) "$WORK/server.prom"
at_least 'nfsrdma_server_memory_bytes{kind="rdma_connections"}' 1 "$WORK/server.prom"
at_least 'nfsrdma_server_call_seconds_count{program="NFS",proc="WRITE"}' 8 "$WORK/server.prom"
at_least 'nfsrdma_server_calls_total{program="NFS",proc="LOOKUP"}' 1 "$WORK/server.prom"
# By transport, by client address, by export; the processes' own figures; the mount's identity.
at_least 'nfsrdma_server_transport_calls_total{transport="rdma"}' 8 "$WORK/server.prom"
at_least 'nfsrdma_server_transport_calls_total{transport="tcp"}' 1 "$WORK/server.prom"  # MOUNT
[ -n "$(value 'nfsrdma_server_connections{transport="tcp"}' "$WORK/server.prom")" ] || fail "no TCP connection gauge"
at_least 'nfsrdma_server_client_calls_total{client="127.0.0.1"}' 9 "$WORK/server.prom"
at_least "nfsrdma_server_export_bytes_total{export=\"$(realpath "$EXPORT")\",op=\"write\"}" $((8 << 20)) "$WORK/server.prom"
for f in server client; do
  at_least process_resident_memory_bytes $((1 << 20)) "$WORK/$f.prom"
  at_least process_cpu_seconds_total 0.001 "$WORK/$f.prom"
done
grep -q "^nfsrdma_client_mount_info{mountpoint=\"$MNT\",server=\"127.0.0.1\",export=\"$EXPORT\",proto=\"rdma\",provider=\"tcp\"} 1$" \
  "$WORK/client.prom" || fail "no mount info: $(grep mount_info "$WORK/client.prom")"
# A LOOKUP's NOENT is an answer, not an error, on either side.
[ "$(value 'nfsrdma_server_errors_total{program="NFS",proc="LOOKUP"}' "$WORK/server.prom")" = 0 ] ||
  fail "a LOOKUP of a missing name counted as a server error"
[ "$(value 'nfsrdma_client_errors_total{proc="LOOKUP"}' "$WORK/client.prom")" = 0 ] ||
  fail "a LOOKUP of a missing name counted as a client error"
# Read again past the mount's cache: the server has the file open and its
# data in the page cache, so READs run on the connection's thread.
dd if="$MNT/data" of=/dev/null bs=1M iflag=direct status=none || fail "O_DIRECT read"
curl -sf "http://127.0.0.1:$SMET/metrics" >"$WORK/server.prom" || fail "no server metrics"
at_least 'nfsrdma_server_open_file_lookups_total{result="hit"}' 8 "$WORK/server.prom"
at_least 'nfsrdma_server_inline_calls_total{kind="read",result="ran"}' 8 "$WORK/server.prom"
at_least 'nfsrdma_client_calls_total{proc="COMMIT"}' 1 "$WORK/client.prom"
at_least 'nfsrdma_client_bytes_total{op="write"}' $((8 << 20)) "$WORK/client.prom"
at_least 'nfsrdma_client_call_seconds_bucket{proc="WRITE",le="+Inf"}' 8 "$WORK/client.prom"
echo "ok: server and client metrics count the work done"

# RDMA memory: the server exposes only its payload buffers: the device's pool
# (64 x 1 MiB + 64 KiB) and the connection's 8 KiB per request (its grant,
# and as many again up to 16), however much moved; the client only its I/O
# buffers (the mount's read, write and small-write pools: 128 MiB) and its
# bounce buffers (48 x 1 MiB + 64 KiB).
[ "$(value 'nfsrdma_server_connections{transport="rdma"}' "$WORK/server.prom")" = 1 ] || fail "the mount should hold one RDMA connection"
granted=$(value 'nfsrdma_server_rdma_credits_granted' "$WORK/server.prom")
requests=$((granted + (granted < 16 ? granted : 16)))
[ "$(value 'nfsrdma_rdma_registered_bytes{access="remote"}' "$WORK/server.prom")" = \
  $((64 * 1114112 + requests * 8192)) ] || fail "server remote-accessible memory is not just its payload buffers"
[ "$(value 'nfsrdma_rdma_registered_bytes{access="remote"}' "$WORK/client.prom")" = $((128 * 1048576 + 48 * 1114112)) ] ||
  fail "client remote-accessible memory is not just its I/O and bounce buffers"
echo "ok: registered memory is bounded: the server's payload buffers, the client's I/O buffers"

python3 "$SRC/tools/nfsrdma-stat" "127.0.0.1:$CMET" >"$WORK/stat" || fail "nfsrdma-stat"
grep -Eq '^write: +[0-9.]+ +8192\.0 ' "$WORK/stat" || { cat "$WORK/stat"; fail "nfsrdma-stat: no 8 MiB written"; }
grep -Eq '^COMMIT +[1-9]' "$WORK/stat" || { cat "$WORK/stat"; fail "nfsrdma-stat: no COMMIT row"; }
# The mount's one connection: working, with the 8 MiB written among its bytes sent.
awk '$1 == "0" && $2 == "any" && $4 == "127.0.0.1" && $5 == 1 && $6 > 8 && $7 >= 8192 {ok = 1} END {exit !ok}' "$WORK/stat" ||
  { cat "$WORK/stat"; fail "nfsrdma-stat: no row for the mount's connection"; }
# An interval report counts what happened in the interval only: nothing on
# an idle mount, then exactly the 20 LOOKUPs of missing names made in it.
python3 "$SRC/tools/nfsrdma-stat" "127.0.0.1:$CMET" 0.5 1 >"$WORK/stat2" || fail "nfsrdma-stat interval report"
grep -q "in the last 0.5 s" "$WORK/stat2" || fail "nfsrdma-stat interval report"
grep -Eq '^read: +0\.0 +0\.0 ' "$WORK/stat2" && grep -Eq '^write: +0\.0 +0\.0 ' "$WORK/stat2" &&
  ! grep -Eq '^[A-Z]+ +[0-9]+ ' "$WORK/stat2" || { cat "$WORK/stat2"; fail "nfsrdma-stat: calls on an idle mount"; }
python3 "$SRC/tools/nfsrdma-stat" "127.0.0.1:$CMET" 2 1 >"$WORK/stat3" &
STAT_PID=$!
sleep 0.5
for i in $(seq 20); do stat "$MNT/missing-$i" 2>/dev/null && fail "missing-$i exists"; done
wait "$STAT_PID" || fail "nfsrdma-stat interval report"
grep -Eq '^LOOKUP +20 +[0-9.]+ +0$' "$WORK/stat3" || { cat "$WORK/stat3"; fail "nfsrdma-stat: not 20 LOOKUPs, 0 errors"; }
echo "ok: nfsrdma-stat"

cat >"$WORK/prometheus.yml" <<YML
global: { scrape_interval: 1s }
scrape_configs:
  - job_name: nfsrdma
    static_configs: [ { targets: ["127.0.0.1:$SMET", "127.0.0.1:$CMET"] } ]
YML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PROM" >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
query() { curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$PROM/api/v1/query"; }
found=
for _ in $(seq 60); do
  if query 'sum(up{job="nfsrdma"})' | grep -q '"2"' &&
     query 'nfsrdma_server_calls_total{proc="WRITE"}' | grep -q '"result":\[{' &&
     query 'nfsrdma_client_bytes_total{op="write"}' | grep -q '"result":\[{'; then found=1; break; fi
  sleep 0.5
done
[ -n "$found" ] || { tail -5 "$WORK/prometheus.log"; fail "Prometheus did not scrape the expected series"; }
echo "ok: Prometheus scrapes both endpoints and finds the series"

python3 - "$SRC/dashboards/grafana/nfsrdma.json" "http://127.0.0.1:$PROM" "$WORK/server.prom" "$WORK/client.prom" <<'PY' ||
import json, re, sys, time, urllib.parse, urllib.request
dash, prom = json.load(open(sys.argv[1])), sys.argv[2]
exported = set()
for f in sys.argv[3:]:
    exported |= {m.group(1) for m in re.finditer(r"^(nfsrdma_\w+)", open(f).read(), re.M)}
targets = [(p, t["expr"]) for p in dash["panels"] for t in p["targets"]]
used = {m for _, e in targets for m in re.findall(r"nfsrdma_\w+", e)}
missing = sorted(used - exported)
assert not missing, f"the dashboard uses metrics nobody exports: {missing}"
assert len(dash["panels"]) >= 8 and any(p["type"] == "heatmap" for p in dash["panels"])

# Every selector filters on the instance variable: multi-select, with All.
var = {v["name"]: v for v in dash["templating"]["list"]}.get("instance")
assert var and var["type"] == "query" and var["multi"] and var["includeAll"], f"no multi-select instance variable with All: {var}"
for p, e in targets:
    for name, labels in re.findall(r"(nfsrdma_\w+)(\{[^}]*\})?", e):
        assert 'instance=~"$instance"' in labels, f"{p['title']}: {name} is not filtered on $instance: {e}"

# Each panel's unit is what its queries return.
def units(e):
    if "histogram_quantile" in e:
        return {"s"}
    if "_bucket" in e:  # a heatmap's cells: calls per second in each bucket
        return {"reqps", "ops"}
    if re.search(r"\brate\(nfsrdma_\w+_bytes_total", e):
        return {"Bps", "binBps"}
    if re.search(r"\brate\(process_cpu_seconds_total", e):
        return {"short"}  # cores busy
    if re.search(r"^process_\w+_bytes", e):
        return {"bytes"}
    if re.search(r"\brate\(", e):
        return {"reqps", "ops"}
    return {"short", "none"}  # gauges and increase(): counts
for p, e in targets:
    unit = p["fieldConfig"]["defaults"]["unit"]
    assert unit in units(e), f"{p['title']}: unit {unit} for {e}"
    if p["type"] == "heatmap":
        assert p["options"]["yAxis"]["unit"] == "s", p["title"]

def query(q):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    r = json.load(urllib.request.urlopen(url))
    assert r["status"] == "success", (q, r)
    return r["data"]["result"]

# The variable's query finds both processes; with All (allValue), every panel's
# query is valid PromQL, and those over metrics exported here return series.
inner = re.fullmatch(r"query_result\((.+)\)", var["query"]).group(1)
regex = re.compile(var["regex"].strip("/"))
# Grafana matches the regex against each result written as {label="value",...}.
shown = ["{" + ",".join(f'{k}="{v}"' for k, v in x["metric"].items()) + "}" for x in query(inner)]
found = {regex.search(s).group(1) for s in shown}
up = {x["metric"]["instance"] for x in query('up{job="nfsrdma"}')}
assert found == up and len(up) == 2, (found, up)
for _ in range(30):
    empty = [e for p, e in targets
             if set(re.findall(r"nfsrdma_\w+", e)) <= exported and not query(e.replace("$instance", var["allValue"]))]
    if not empty:
        break
    time.sleep(1)
assert not empty, f"no series for: {empty}"
print(f"ok: Grafana dashboard: {len(dash['panels'])} panels, {len(used)} metrics, all exported, "
      f"filtered on $instance ({', '.join(sorted(found))}), units match the queries")
PY
  fail "Grafana dashboard"
