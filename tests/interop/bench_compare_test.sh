#!/usr/bin/env bash
# The comparison harness end to end (smoke preset: every path, shortest runs):
# results.json holds every cell with its figures and ratios, and report.html
# renders in headless Chromium with no console error and ink on every chart.
. "$(dirname "$0")/common.sh"
: "${BUILD_DIR:?set BUILD_DIR to the meson build directory}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
[ -f "$BUILD_DIR/fio-engine/nfsrdma.so" ] || skip "the fio engine is not built (configure with -Dfio_src)"
command -v chromium >/dev/null || skip "chromium is not installed"
SRC=$(dirname "$TESTS_DIR")

python3 "$SRC/bench/compare/run.py" --preset smoke --build "$BUILD_DIR" --out "$WORK/out" >"$WORK/table" 2>"$WORK/progress" ||
  { cat "$WORK/progress"; fail "bench/compare/run.py failed"; }
grep -q "over RPC-RDMA" "$WORK/progress" || fail "no RPC-RDMA mount announced"
grep -q "^rdma *fuse" "$WORK/table" || { cat "$WORK/table"; fail "no rdma FUSE row in the table"; }
python3 - "$WORK/out/results.json" <<'PY' || fail "results.json is incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
seen = {(c["transport"], c["path"]) for c in r["cells"]}
want = {("rdma", "engine"), ("rdma", "fuse"), ("tcp", "engine"), ("tcp", "fuse"), ("local", "local")}
assert want <= seen, f"missing paths: {want - seen}"
for c in r["cells"]:
    assert c["bw_MiBps"]["median"] > 0 and c["iops"]["median"] > 0, c
    assert c["lat_us"]["p50"] > 0 and c["lat_us"]["p99"] >= c["lat_us"]["p50"], c
    assert c["cpu_client_s_per_GiB"] > 0, c
    if c["path"] != "local":
        assert c["cpu_server_s_per_GiB"] > 0, c
        assert 0 < c["transport_limit"]["ratio"], c
        assert c["storage_ratio"] > 0, c
assert r["baselines"]["raw_rma_MiBps"] and r["baselines"]["null_calls_per_s"]["rdma"] > 0
assert r["host"]["provider"] == "tcp" and r["unavailable"]
for t in ("rdma", "tcp"):
    m = r["metadata"][t]
    assert m["files"] > 0 and all(m[k]["per_s"] > 0 for k in ("create", "stat", "unlink")), m
print("ok: results.json has", len(r["cells"]), "cells with figures, ratios and CPU per GiB")
PY

report=$WORK/out/report.html
[ -s "$report" ] || fail "no report.html"
timeout 120 chromium --headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
  --virtual-time-budget=10000 --dump-dom "file://$report" >"$WORK/dom" 2>"$WORK/chromium.log" ||
  fail "chromium could not load the report"
body=$(grep -o '<body[^>]*>' "$WORK/dom")
total=$(sed -n 's/.*data-charts-total="\([0-9]*\)".*/\1/p' <<<"$body")
drawn=$(sed -n 's/.*data-charts-drawn="\([0-9]*\)".*/\1/p' <<<"$body")
errors=$(sed -n 's/.*data-errors="\([0-9]*\)".*/\1/p' <<<"$body")
[ "${total:-0}" -ge 8 ] && [ "$drawn" = "$total" ] || fail "charts drawn: ${drawn:-?} of ${total:-?}"
[ "$errors" = 0 ] || fail "the report raised $errors script errors"
if grep -E 'CONSOLE.*(Uncaught|Error)' "$WORK/chromium.log"; then fail "console errors while rendering"; fi
echo "ok: report renders, $drawn of $total charts drawn, no console errors"
timeout 120 chromium --headless=new --no-sandbox --disable-gpu --window-size=1400,3000 \
  --screenshot="$WORK/shot.png" "file://$report" >/dev/null 2>&1 || fail "no screenshot"
python3 - "$WORK/shot.png" <<'PY' || fail "the screenshot is blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", data[16:24])
# Inflate the image data and count distinct byte values: a blank page has a handful.
idat, i = b"", 8
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    if kind == b"IDAT":
        idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
assert w >= 1000 and h >= 2000 and len(set(raw[::7])) > 64, (w, h, len(set(raw[::7])))
print(f"ok: screenshot {w}x{h} with varied pixels")
PY
