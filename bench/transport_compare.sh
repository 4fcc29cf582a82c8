#!/usr/bin/env bash
# Raw libfabric RMA bandwidth (fabric_bench) against NFS READ/WRITE through
# client/core over RPC-RDMA (through the client's bounce buffers, and in place
# from registered buffers as the fio engine will use it) and over TCP
# (nfs_bench), in one run on loopback,
# with the ratio of each NFS figure to the raw RMA operation that carries it
# (NFS READ data moves by RDMA Write, NFS WRITE data by RDMA Read) and the
# server's CPU seconds per GiB (from /proc). Medians over REPEATS.
#   bench/transport_compare.sh [build-dir]     BENCH_SECONDS=3 REPEATS=3 DEPTH=16 PROVIDER=tcp REGION_MIB=128
set -euo pipefail
BUILD=${1:-build}
SECS=${BENCH_SECONDS:-3}
REPEATS=${REPEATS:-3}
DEPTH=${DEPTH:-16}
REGION_MIB=${REGION_MIB:-128}
PROVIDER=${PROVIDER:-tcp}
. "$(dirname "$0")/setup.sh"

: >"$WORK/results"
for r in $(seq "$REPEATS"); do
  "$BUILD/bench/fabric_bench" --provider "$PROVIDER" --peer 127.0.0.1 --port "$FAB" --seconds "$SECS" \
    --depth "$DEPTH" --json | python3 -c '
import json, sys
for x in json.load(sys.stdin)["results"]:
    if x["unit"] == "MiB/s":
        op = "write" if "Write" in x["test"] else "read"
        print("raw", op, x["size"], "%.1f" % x["value"], 0)' >>"$WORK/results"
  for mode in rdma rdma-zc tcp; do
    proto=${mode%-zc}
    zc=$([ "$mode" = rdma-zc ] && echo --zero-copy || true)
    pport=$([ "$proto" = rdma ] && echo "$RDMA" || echo "$NFS")
    for op in read write; do
      for bs in 64K 1M; do
        c0=$(server_cpu)
        out=$("$BUILD/bench/nfs_bench" --server "127.0.0.1:$WORK/export" --proto "$proto" --port "$pport" \
          --mount-port "$MNT" --provider "$PROVIDER" --op "$op" --bs "$bs" --depth "$DEPTH" --seconds "$SECS" \
          --region-mib "$REGION_MIB" --file "f-$mode-$op-$bs" $zc --json)
        c1=$(server_cpu)
        python3 - "$out" "$c0" "$c1" "$mode" "$op" "$bs" >>"$WORK/results" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); c0, c1 = float(sys.argv[2]), float(sys.argv[3])
size = "1 MiB" if sys.argv[6] == "1M" else "64 KiB"
print(f"{sys.argv[4]} {sys.argv[5]} {size} {r['mib_per_s']:.1f} {r['client_cpu_s_per_gib']:.3f} {c1 - c0:.3f} {r['iops']:.0f}")
PY
      done
    done
  done
done
python3 - "$WORK/results" "$SECS" "$PROVIDER" "$DEPTH" "$REPEATS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
secs, provider, depth, repeats = float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def med(xs): return statistics.median(xs)
raw = {}
for r in rows:
    if r[0] == "raw":
        raw.setdefault((r[1], r[2] + " " + r[3]), []).append(float(r[4]))
print(f"libfabric provider {provider}, loopback, queue depth {depth}, {secs:g} s per cell, median of {repeats}")
print(f"{'path':<22}{'op':<7}{'size':>8}{'MiB/s':>9}{'IOPS':>9}{'vs raw RMA':>12}{'client CPU s/GiB':>18}{'server CPU s/GiB':>18}")
for (op, size), v in sorted(raw.items()):
    print(f"{'raw RMA ' + ('Write' if op == 'write' else 'Read'):<22}{'':<7}{size:>8}{med(v):>9.0f}{'':>9}{'1.00':>12}{'-':>18}{'-':>18}")
cells = {}
for r in rows:
    if r[0] in ("rdma", "rdma-zc", "tcp"):
        cells.setdefault((r[0], r[1], r[2] + " " + r[3]), []).append(r[4:])
for (proto, op, size), vals in sorted(cells.items()):
    mibs = med([float(v[0]) for v in vals]); ccpu = med([float(v[1]) for v in vals])
    scpu = med([float(v[2]) / (float(v[0]) * secs / 1024) if float(v[0]) else 0 for v in vals])
    iops = med([float(v[3]) for v in vals])
    carrier = raw.get(("write" if op == "read" else "read", size))
    ratio = f"{mibs / med(carrier):.2f}" if carrier else "-"
    label = {"rdma": "NFS/RPC-RDMA bounce", "rdma-zc": "NFS/RPC-RDMA in place", "tcp": "NFS over TCP"}[proto]
    print(f"{label:<22}{op:<7}{size:>8}{mibs:>9.0f}{iops:>9.0f}{ratio:>12}{ccpu:>18.2f}{scpu:>18.2f}")
PY
