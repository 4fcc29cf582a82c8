#!/usr/bin/env bash
# The harness driving fio on another host through fio's client/server mode:
# here the other host is a network namespace joined by a veth pair, running
# `fio --server`; nfsrdma-server listens on the veth address. The remote cells
# must carry figures for both transports.
. "$(dirname "$0")/common.sh"
: "${BUILD_DIR:?set BUILD_DIR to the meson build directory}"
[ -f "$BUILD_DIR/fio-engine/nfsrdma.so" ] || skip "the fio engine is not built (configure with -Dfio_src)"
[ -w /dev/fuse ] || skip "no /dev/fuse"
command -v ip >/dev/null || skip "iproute2 is not installed"
SRC=$(dirname "$TESTS_DIR")
veth_netns mh 213
ip netns exec "$NS" fio --server="$NET.2" >"$WORK/fio-server.log" 2>&1 &
for _ in $(seq 100); do (exec 3<>"/dev/tcp/$NET.2/8765") 2>/dev/null && break; sleep 0.05; done

python3 "$SRC/bench/compare/run.py" --preset smoke --build "$BUILD_DIR" --out "$WORK/out" \
  --fio-client "$NET.2" --server-address "$NET.1" >"$WORK/table" 2>"$WORK/progress" ||
  { tail -20 "$WORK/progress"; fail "the harness failed with a remote fio client"; }
python3 - "$WORK/out/results.json" "$NET.2" <<'PY' || { cat "$WORK/table"; fail "no remote figures"; }
import json, sys
r = json.load(open(sys.argv[1]))
remote = [c for c in r["cells"] if c["path"] == "remote"]
assert {c["transport"] for c in remote} == {"rdma", "tcp"}, remote
for c in remote:
    assert c["clients"] == [sys.argv[2]] and c["bw_MiBps"]["median"] > 0 and c["cpu_server_s_per_GiB"] > 0, c
assert r["host"]["fio_clients"] == [sys.argv[2]]
print(f"ok: {len(remote)} cells run by fio --client on {sys.argv[2]}, over rdma and tcp")
PY
