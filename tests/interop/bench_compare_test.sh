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
    assert m["lock"].get("per_s", 0) > 0, f"no lock figure over {t}: {m['lock']}"
print("ok: results.json has", len(r["cells"]), "cells with figures, ratios and CPU per GiB")
# Transfer sizes: the same job on the 1 MiB and the 4 MiB server, each transport.
t = {(c["transport"], c["transfer"]) for c in r["transfer"] if c["bw_MiBps"]["median"] > 0}
assert t == {(x, y) for x in ("rdma", "tcp") for y in ("1 MiB", "4 MiB")}, t
PY
grep -q "^transfer sizes" "$WORK/table" || fail "no transfer-size table"
# Small files: every program on the export directory and through both mounts,
# each small-file operation with its calls and the three parts of its time.
python3 - "$WORK/out/results.json" <<'PY' || fail "the small-file results are incomplete"
import json, sys
sf = json.load(open(sys.argv[1]))["smallfiles"]
targets = {"export dir", "fuse rdma", "fuse tcp"}
assert set(sf["workloads"]) == {"tar -x", "rm -rf", "rsync -a", "git clone", "git status x2", "sqlite"}, sf["workloads"]
for prog, by in sf["workloads"].items():
    assert set(by) == targets and all(isinstance(v, float) and v > 0 for v in by.values()), (prog, by)
assert sf["inputs"]["tar_files"] == 100 and sf["inputs"]["repo_files"] > 0, sf["inputs"]
for t in ("fuse rdma", "fuse tcp"):
    ops = sf["ops"][t]
    assert ops["create+write+close"]["calls"] >= 2 and ops["unlink"]["calls"] >= 1, ops
    # FUSE requests: at least create, write and release; open and release.
    assert ops["create+write+close"]["fuse_requests"] >= 3 and ops["open+read+close"]["fuse_requests"] >= 2, ops
    for op, v in ops.items():
        assert v["us"] > 0 and None not in (v["outside_us"], v["wire_us"], v["server_us"]), (t, op, v)
print("ok: small files through both mounts")
PY
grep -q "^small files" "$WORK/table" || fail "no small-file table"

. "$TESTS_DIR/interop/report_check.sh"
check_report "$WORK/out/report.html" 8
grep -q "<h2>Transfer sizes</h2>" "$WORK/out/report.html" || fail "no transfer-size section in the report"
grep -q "<h2>Small files</h2>" "$WORK/dom" || fail "no small-file section in the report"

# The verdict at the top: RDMA ÷ TCP bandwidth with large blocks, recomputed
# here from results.json (the geometric mean over the jobs both transports ran
# through the fio engine and the FUSE mount), in the key-ratio table and the
# sentences; every peer with a figure or a reason; no spread column for single runs.
python3 - "$WORK/out/results.json" "$WORK/dom" <<'PY' || fail "the report's verdict"
import json, math, re, sys
r, dom = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
verdict = re.search(r'<section id="verdict">(.*?)</section>', dom, re.S)
assert verdict, "no verdict section"
verdict = verdict.group(1)
assert dom.index('id="verdict"') < dom.index("<h2>Host</h2>"), "the verdict is not at the top"
cells = {(c["transport"], c["path"], c["workload"], c["bs"], c["iodepth"]): c for c in r["cells"] if "error" not in c}
bw = lambda c: c["bw_MiBps"]["median"]
ratios = [bw(c) / bw(cells[("tcp",) + k[1:]]) for k, c in cells.items()
          if k[:2] in (("rdma", "engine"), ("rdma", "fuse")) and k[3] != "4k" and ("tcp",) + k[1:] in cells]
want = math.exp(sum(map(math.log, ratios)) / len(ratios))
got = float(re.search(r'data-key="rdma-tcp-bw" data-value="([0-9.]+)"', verdict).group(1))
assert abs(got - want) <= 1e-3 * want, (got, want)
assert f"bandwidth with large blocks {want:.2f}×" in verdict, "the sentence does not give the ratio"
for key in ("nfs-ganesha", "kernel-nfs", "libnfs"):
    row = re.search(rf'<tr data-key="peer-{key}"[^>]*>.*?</tr>', verdict, re.S)
    assert row and ("data-value" in row.group(0) or "not measured" in row.group(0)), key
if all(c.get("repeats", 1) == 1 for c in cells.values()):
    assert "spread of MiB/s" not in dom, "a spread column for single runs"
# CPU per call, client / server: CPU s/GiB times the block size.
assert "CPU µs per call, client / server" in dom
small = next(c for k, c in cells.items() if k[3] == "4k" and k[1] != "local")
us = [small[k] * 4096 / (1 << 30) * 1e6 for k in ("cpu_client_s_per_GiB", "cpu_server_s_per_GiB")]
assert f"{us[0]:,.1f} / {us[1]:,.1f}" in dom, ("no CPU per call for", small["transport"], small["path"], us)
print(f"ok: the verdict gives RDMA ÷ TCP bandwidth {want:.2f}× over {len(ratios)} large-block jobs")
PY

# Two builds in turn (--preset ab; here the same build on both sides): every
# cell has both sides' figures and their ratio, in results.json, the table and
# the report.
python3 "$SRC/bench/compare/run.py" --preset ab --base "$BUILD_DIR" --build "$BUILD_DIR" --cells randread:4k:8 \
  --transports rdma,tcp --batch --repeats 1 --seconds 1 --out "$WORK/ab" >"$WORK/ab-table" 2>"$WORK/ab-progress" ||
  { cat "$WORK/ab-progress"; fail "bench/compare/run.py --preset ab failed"; }
grep -q "^two builds in turn.*in batches" "$WORK/ab-table" && grep -q "^rdma rand read 4k QD8" "$WORK/ab-table" ||
  { cat "$WORK/ab-table"; fail "no two-build table"; }
python3 - "$WORK/ab/results.json" <<'PY' || fail "the two-build results are incomplete"
import json, sys
ab = json.load(open(sys.argv[1]))["ab"]
assert {c["transport"] for c in ab["cells"]} == {"rdma", "tcp"}, ab["cells"]
for c in ab["cells"]:
    for who in ("base", "new"):
        s = c[who]
        assert s["iops"]["median"] > 0 and s["cpu_server_us_per_call"] > 0 and s["cpu_client_us_per_call"] > 0, (who, s)
    assert abs(c["new_over_base"]["iops"] - c["new"]["iops"]["median"] / c["base"]["iops"]["median"]) < 1e-9, c
assert ab["base"]["commit"] != "?", ab["base"]
assert ab["batch"] is True, ab
print("ok: two builds, both transports, both sides measured")
PY
check_report "$WORK/ab/report.html" 0
grep -q "<h2>Two builds</h2>" "$WORK/dom" || fail "no two-build section in the report"
