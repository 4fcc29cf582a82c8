#!/usr/bin/env bash
# fabric_bench end to end on the tcp provider: a server, a short client run in
# JSON, every figure present and positive (READ-shaped calls need the server to
# answer each call with an RMA Write and a reply; WRITE-shaped ones with an RMA
# Read, then the reply).
set -euo pipefail
: "${FABRIC_BENCH:?set FABRIC_BENCH to the fabric_bench binary}"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$FABRIC_BENCH" --provider tcp --port "$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
sleep 0.3
OUT=$(timeout 60 "$FABRIC_BENCH" --provider tcp --peer 127.0.0.1 --port "$PORT" --seconds 0.3 --json)
python3 - "$OUT" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
tests = {(x["test"], x["size"]): x["value"] for x in r["results"]}
need = [("send/recv round trip", "64 B"), ("RMA Write bandwidth", "1 MiB"), ("RMA Read bandwidth", "1 MiB"),
        ("RMA Write bandwidth", "64 KiB"), ("RMA Read bandwidth", "64 KiB"), ("READ-shaped calls", "4 KiB"),
        ("WRITE-shaped calls", "4 KiB")]
for k in need:
    assert k in tests and tests[k] > 0, f"missing or zero: {k}"
print("ok:", ", ".join(f"{t} {s}: {tests[(t, s)]:.1f}" for t, s in need))
PY
