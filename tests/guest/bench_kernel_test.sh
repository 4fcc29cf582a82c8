#!/usr/bin/env bash
# The kernel comparison end to end (bench/compare/run.py --preset kernel-smoke,
# the shortest version of make bench-kernel): one soft-RoCE guest boot runs
# both jobs through the kernel's client, nfsrdma-fuse and the fio engine, over
# RDMA and TCP, against the kernel's nfsd and nfsrdma-server, then small files
# through the kernel's client and nfsrdma-fuse on our server. Every cell has
# figures and a ratio to the kernel, and the report's "Against the kernel"
# and small-file sections render in headless Chromium.
. "$(dirname "$0")/../interop/common.sh"
: "${BUILD_DIR:?set BUILD_DIR to the meson build directory}"
[ -f "$BUILD_DIR/fio-engine/nfsrdma.so" ] || skip "the fio engine is not built (configure with -Dfio_src)"
command -v chromium >/dev/null || skip "chromium is not installed"
command -v qemu-system-x86_64 >/dev/null || skip "QEMU is not installed"
SRC=$(dirname "$TESTS_DIR")
BUILD_DIR=$(realpath "$BUILD_DIR")

python3 "$SRC/bench/compare/run.py" --preset kernel-smoke --build "$BUILD_DIR" --out "$WORK/out" \
  >"$WORK/table" 2>"$WORK/progress" || { tail -30 "$WORK/progress"; cat "$WORK/table"; fail "run.py failed"; }
grep -q "^against the kernel" "$WORK/table" || { cat "$WORK/table"; fail "no kernel table printed"; }
python3 - "$WORK/out/results.json" <<'PY' || { tail -40 "$WORK/progress"; fail "the kernel comparison is incomplete"; }
import json, sys
k = json.load(open(sys.argv[1]))["kernel"]
assert "error" not in k, k.get("error")
cells = k["cells"]
pairs = {(c["client"], c["server"], c["transport"]) for c in cells}
want = {(c, s, t) for c in ("kernel", "fuse", "engine") for s in ("kernel", "nfsrdma") for t in ("rdma", "tcp")}
assert pairs == want, f"missing: {want - pairs}"
assert len(cells) == len(want) * 2, len(cells)
for c in cells:
    assert "error" not in c, c
    assert c["bw_MiBps"]["median"] > 0 and c["iops"]["median"] > 0, c
    assert c["lat_us"]["p99"] >= c["lat_us"]["p50"] > 0, c
    assert c["cpu_guest_s_per_GiB"] > 0 and c["cpu_server_s_per_GiB"] > 0, c
    assert c["cpu_guest_s_per_GiB"] >= c["cpu_server_s_per_GiB"], c
    v = c["vs_kernel"]
    assert v["bw"] > 0 and v["cpu"] > 0, c
    if c["client"] == c["server"] == "kernel":
        assert abs(v["bw"] - 1) < 1e-9, c
meta = k["metadata"]
assert len(meta) == 8 and all(m[op]["per_s"] > 0 for m in meta for op in ("create", "stat", "unlink")), meta
assert len(k["limits"]["fabric_bench"]) == 4, k["limits"]
assert len(k["limits"]["perftest"]) == 4, k["limits"]
# Small files through the kernel's client and nfsrdma-fuse on our server, both
# transports: the programs, and each operation's calls as the server counted them.
sf = k["smallfiles"]
mounts = {f"{c} nfsrdma {t}" for c in ("kernel", "fuse") for t in ("rdma", "tcp")}
for prog, by in sf["workloads"].items():
    assert set(by) == mounts | {"export dir"} and all(isinstance(v, float) and v > 0 for v in by.values()), (prog, by)
assert set(sf["ops"]) == mounts, sf["ops"].keys()
for m, ops in sf["ops"].items():
    assert ops["create+write+close"]["calls"] >= 2 and ops["create+write+close"]["wire_us"] is not None, (m, ops)
print(f"ok: {len(cells)} cells over {len(pairs)} client/server/transport pairs, 8 metadata mounts, "
      "fabric_bench and perftest limits, small files through 4 mounts")
PY

. "$TESTS_DIR/interop/report_check.sh"
check_report "$WORK/out/report.html" 4
for text in "Against the kernel" "soft-RoCE" "RDMA ÷ TCP" "guest CPU seconds per GiB" "Metadata: create, stat and unlink" \
  "Small files in the guest"; do
  grep -qF "$text" "$WORK/dom" || fail "the report has no \"$text\""
done
echo "ok: the report's kernel section renders"
