#!/usr/bin/env bash
# fio --ioengine=nfsrdma in one run against its baselines: raw libfabric RMA
# (fabric_bench) for 1 MiB sequential read/write at iodepth 16, and the NULL
# call rate (nfs_bench --op null) for 4 KiB random reads at iodepth 32, over
# RPC-RDMA and over TCP; CPU seconds per GiB for fio (client) and the server.
#   bench/fio_compare.sh [build-dir]     SECS=5 PROVIDER=tcp SIZE=1G
set -euo pipefail
BUILD=${1:-build}
SECS=${SECS:-5}
PROVIDER=${PROVIDER:-tcp}
SIZE=${SIZE:-1G}
ENGINE=$BUILD/fio-engine/nfsrdma.so
[ -f "$ENGINE" ] || { echo "fio_compare: $ENGINE not built (make build)"; exit 1; }
. "$(dirname "$0")/setup.sh"

"$BUILD/bench/fabric_bench" --provider "$PROVIDER" --peer 127.0.0.1 --port "$FAB" --seconds "$SECS" --depth 16 \
  --json >"$WORK/raw.json"
fio_job() {  # label transport rw bs depth
  local port=$([ "$2" = rdma ] && echo "$RDMA" || echo "$NFS")
  local c0 c1
  c0=$(server_cpu)
  # fio's own usr/sys figures count only the job thread, not the engine's
  # transport threads: take the whole fio process tree's CPU instead.
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), check=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime + u.ru_stime)' "$WORK/$1.json" \
    fio --name="$1" --ioengine="external:$ENGINE" --nfs_export="127.0.0.1:$WORK/export" --nfs_transport="$2" \
    --nfs_port="$port" --nfs_mount_port="$MNT" --nfs_provider="$PROVIDER" --filename="data-$2" --size="$SIZE" \
    --rw="$3" --bs="$4" --iodepth="$5" --time_based --runtime="$SECS" --output-format=json >"$WORK/$1.fiocpu"
  c1=$(server_cpu)
  echo "$c0 $c1" >"$WORK/$1.cpu"
}
for t in rdma tcp; do
  # Lay the file out once, so reads return data.
  fio --name=layout --ioengine="external:$ENGINE" --nfs_export="127.0.0.1:$WORK/export" --nfs_transport="$t" \
    --nfs_port="$([ "$t" = rdma ] && echo "$RDMA" || echo "$NFS")" --nfs_mount_port="$MNT" --nfs_provider="$PROVIDER" \
    --filename="data-$t" --size="$SIZE" --rw=write --bs=1M --iodepth=16 >/dev/null
  fio_job "$t-seqwrite" "$t" write 1M 16
  fio_job "$t-seqread" "$t" read 1M 16
  fio_job "$t-randread" "$t" randread 4k 32
  "$BUILD/bench/nfs_bench" --server "127.0.0.1:$WORK/export" --proto "$t" \
    --port "$([ "$t" = rdma ] && echo "$RDMA" || echo "$NFS")" --mount-port "$MNT" --provider "$PROVIDER" \
    --op null --depth 32 --seconds "$SECS" --json >"$WORK/$t-null.json"
done
python3 - "$WORK" "$PROVIDER" "$SECS" <<'PY'
import json, sys
w, provider, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
raw = {(("write" if "Write" in x["test"] else "read"), x["size"]): x["value"]
       for x in json.load(open(f"{w}/raw.json"))["results"] if x["unit"] == "MiB/s"}
print(f"fio --ioengine=nfsrdma, libfabric provider {provider}, loopback, {secs:g} s per job, one run")
print(f"{'transport':<10}{'job':<22}{'result':>16}{'baseline':>26}{'ratio':>7}{'fio CPU s/GiB':>15}{'server CPU s/GiB':>18}")
for t in ("rdma", "tcp"):
    null_iops = json.load(open(f"{w}/{t}-null.json"))["iops"]
    for job, label in (("seqwrite", "1 MiB seq write QD16"), ("seqread", "1 MiB seq read QD16"),
                       ("randread", "4 KiB rand read QD32")):
        j = json.load(open(f"{w}/{t}-{job}.json"))["jobs"][0]
        side = j["write"] if job == "seqwrite" else j["read"]
        mibs = side["bw_bytes"] / 2**20
        gib = side["io_bytes"] / 2**30
        cpu = float(open(f"{w}/{t}-{job}.fiocpu").read())
        c0, c1 = map(float, open(f"{w}/{t}-{job}.cpu").read().split())
        fio_cpu = cpu / gib if gib else 0
        srv_cpu = (c1 - c0) / gib if gib else 0
        if job == "randread":
            result, base, ratio = f"{side['iops']:.0f} IOPS", f"NULL {null_iops:.0f}/s", side["iops"] / null_iops
        else:
            carrier = ("read" if job == "seqwrite" else "write", "1 MiB")  # WRITE data moves by RDMA Read
            base_v = raw[carrier]
            result, base = f"{mibs:.0f} MiB/s", f"raw RMA {carrier[0]} {base_v:.0f}"
            ratio = mibs / base_v
        print(f"{t:<10}{label:<22}{result:>16}{base:>26}{ratio:>7.2f}{fio_cpu:>15.2f}{srv_cpu:>18.2f}")
PY
