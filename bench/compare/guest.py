#!/usr/bin/env python3
"""The kernel comparison, inside the soft-RoCE guest (guest.sh starts the
link and both servers first). The same fio jobs through three clients (the
kernel's NFSv3 client, nfsrdma-fuse, the fio engine), over RPC-RDMA on verbs
and over TCP, against two servers (the kernel's nfsd, nfsrdma-server); the raw
verbs limit of the same devices (fabric_bench, and perftest beside it); a
metadata job through every mount. Writes $RESULTS/kernel.json.

CPU is the guest's busy time over each run (/proc/stat), the same for every
cell whether the work is in processes, kernel threads or softirqs; the
server's share is its own threads (nfsd's kernel threads, or nfsrdma-server),
and the client's is the rest, soft-RoCE's work for both ends included.

  guest.py --preset kernel|kernel-quick|kernel-smallfiles|kernel-smoke [--seconds S] [--repeats N]
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import matrix  # noqa: E402
import metadata  # noqa: E402
import smallfiles  # noqa: E402

ENV = os.environ
CLK = os.sysconf("SC_CLK_TCK")
BUILD = RESULTS = IP = None
SERVERS = {}  # name: (export, NFS port by transport, MOUNT port)


def guest_environment():
    """What guest.sh exports; outside the guest, a clear refusal."""
    global BUILD, RESULTS, IP
    missing = [k for k in ("BUILD", "RESULTS", "SERVER_IP", "PORT", "MPORT", "RPORT") if k not in ENV]
    if missing:
        sys.exit("guest.py: runs inside the soft-RoCE guest, started by bench/compare/guest.sh "
                 f"(bench/compare/run.py --preset kernel); missing {', '.join(missing)}")
    BUILD, RESULTS, IP = ENV["BUILD"], ENV["RESULTS"], ENV["SERVER_IP"]
    SERVERS["kernel"] = ("/srv/kernel", {"rdma": 20049, "tcp": 2049}, 20048)
    SERVERS["nfsrdma"] = ("/srv/ours", {"rdma": int(ENV["RPORT"]), "tcp": int(ENV["PORT"])}, int(ENV["MPORT"]))
CLIENTS = ("kernel", "fuse", "engine")
UNITS = {"fabric_bench": "MiB/s", "perftest": "MB/s"}  # each tool's own
MNT = "/mnt/bench"
# The Prometheus endpoints of nfsrdma-server (guest.sh starts it with one) and
# of each nfsrdma-fuse mount.
SERVER_METRICS, FUSE_METRICS = "127.0.0.1:9464", "127.0.0.1:9465"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def busy_seconds():
    """CPU seconds the whole guest has spent not idle."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK


def server_pids(server):
    if server == "nfsrdma":
        out = subprocess.run(["pgrep", "-f", f"nfsrdma-server --provider verbs --port {ENV['PORT']}"],
                             capture_output=True, text=True).stdout.split()
    else:
        out = subprocess.run(["pgrep", "-x", "nfsd"], capture_output=True, text=True).stdout.split()
    if not out:
        raise RuntimeError(f"no {server} server threads")
    return [int(p) for p in out]


def server_seconds(pids):
    total = 0.0
    for p in pids:
        try:
            total += harness.cpu_seconds(p)
        except OSError:
            pass
    return total


# This guest's one rpcbind has the kernel's lockd: our server's NLM cannot be
# registered beside it, so mounts of ours keep locks local and time none.
NO_LOCKS_ON_OURS = "mounted with nolock: the guest's one rpcbind holds the kernel's lockd"


def mount(client, server, transport):
    export, ports, mport = SERVERS[server]
    os.makedirs(MNT, exist_ok=True)
    lock = "lock" if server == "kernel" else "nolock"
    if client == "kernel":
        opts = f"vers=3,{lock},hard,proto={transport},port={ports[transport]},mountport={mport},mountproto=tcp"
        subprocess.run(["mount", "-t", "nfs", "-o", opts, f"{IP}:{export}", MNT], check=True, timeout=120)
    else:
        opts = (f"proto={transport},provider=verbs,port={ports[transport]},mountport={mport},{lock},"
                f"metrics={FUSE_METRICS}")
        subprocess.run([f"{BUILD}/client/fuse/nfsrdma-fuse", "-o", opts, f"{IP}:{export}", MNT], check=True,
                       timeout=120)
    if not os.path.ismount(MNT):
        raise RuntimeError(f"{client} client did not mount {server} over {transport}")


def job_args(client, server, transport):
    export, ports, mport = SERVERS[server]
    if client == "engine":
        return ["fio", f"--ioengine=external:{BUILD}/fio-engine/nfsrdma.so", f"--nfs_export={IP}:{export}",
                f"--nfs_transport={transport}", f"--nfs_port={ports[transport]}", f"--nfs_mount_port={mport}",
                "--nfs_provider=verbs", "--filename=data"]
    return matrix.file_args(os.path.join(MNT, "data"))


def measure(args, name, rw, repeats, seconds, pids):
    runs = []
    for i in range(repeats):
        path = os.path.join(RESULTS, "fio", f"{name}.{i}.json")
        b0, s0 = busy_seconds(), server_seconds(pids)
        harness.run_measured(args, path, timeout=seconds * 20 + 120)
        guest, srv = busy_seconds() - b0, server_seconds(pids) - s0
        s = harness.fio_summary(path, rw)
        gib = s["io_bytes"] / 2**30 or 1e-9
        s.update(cpu_guest_s_per_GiB=guest / gib, cpu_server_s_per_GiB=srv / gib,
                 cpu_client_s_per_GiB=(guest - srv) / gib)
        runs.append(s)
    return harness.summarise(runs, ("cpu_guest_s_per_GiB", "cpu_server_s_per_GiB", "cpu_client_s_per_GiB"))


def series(client, server, transport, p, result, step):
    """Every job of the preset for one client, server and transport, then the
    metadata job through the mount."""
    mounted, why = False, None
    try:
        pids = server_pids(server)
        if client != "engine":
            mount(client, server, transport)
            mounted = True
    except Exception as e:  # every job of the series fails with the reason
        why = f"could not start: {str(e)[:250]}"
    for rw, bs, depth in p["jobs"]:
        name = f"{client}-{server}-{transport}-{rw}-{bs}-qd{depth}"
        cell = {"client": client, "server": server, "transport": transport, "workload": rw, "bs": bs,
                "iodepth": depth}
        try:
            if why:
                raise RuntimeError(why)
            common = matrix.fio_common(name, rw, bs, depth, p["seconds"], p["size"])
            cell.update(measure(job_args(client, server, transport) + common, name, rw, p["repeats"],
                                p["seconds"], pids))
        except Exception as e:  # a failing cell is a finding, not the end of the run
            cell["error"] = str(e)[:300]
        result["cells"].append(cell)
        step(cell)
    if not mounted:
        return
    try:
        srv = lambda: server_seconds(pids)
        m = metadata.measure(MNT, p["files"], {"client": lambda: busy_seconds() - srv(), "server": srv},
                             None if server == "kernel" else NO_LOCKS_ON_OURS)
        m.update(client=client, server=server, transport=transport)
        result["metadata"].append(m)
        log(f"metadata {client} -> {server} over {transport}: " +
            ", ".join(f"{k} {m[k]['per_s']:.0f}/s" for k in ("create", "stat", "unlink")) + ", " + metadata.lock_text(m))
    except Exception as e:
        result["metadata"].append({"client": client, "server": server, "transport": transport,
                                   "error": str(e)[:300]})
    if p.get("smallfiles") and server == "nfsrdma":
        try:
            guest_smallfiles(client, server, transport, p["smallfiles"], result)
        except Exception as e:
            result["unavailable"].append({"name": f"small files, {client} -> {server} over {transport}",
                                          "why": str(e)[:300]})
    subprocess.run(["umount", MNT], timeout=120)


def guest_smallfiles(client, server, transport, spec, result):
    """Small files through the mount on MNT (smallfiles.py): each operation
    with the calls the server counted and the time split, then the real
    programs, added to result["smallfiles"] under "CLIENT SERVER TRANSPORT"."""
    sf = result["smallfiles"]
    target = f"{client} {server} {transport}"
    srv = ((lambda: smallfiles.metrics_calls(SERVER_METRICS, "server")) if server == "nfsrdma"
           else smallfiles.nfsd_calls)
    cli = ((lambda: smallfiles.metrics_calls(FUSE_METRICS, "client")) if client == "fuse"
           else lambda: smallfiles.kernel_client_calls(MNT))
    req = (lambda: smallfiles.fuse_requests(FUSE_METRICS)) if client == "fuse" else None
    sf["ops"][target] = smallfiles.per_op(MNT, spec["ops"], srv, cli, req)
    for prog, t in smallfiles.workloads(sf["_inputs"], {target: MNT}, spec["repeats"], log).items():
        sf["workloads"][prog].update(t)


def fabric_limits(seconds):
    """fabric_bench's RMA bandwidth on verbs between the two rxe devices."""
    port = "20070"
    srv = subprocess.Popen([f"{BUILD}/bench/fabric_bench", "--provider", "verbs", "--port", port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = subprocess.run([f"{BUILD}/bench/fabric_bench", "--provider", "verbs", "--peer", IP, "--port", port,
                            "--seconds", str(seconds), "--depth", "16", "--buffer-mib", "16", "--json"],
                           capture_output=True, text=True, timeout=300, check=True)
    finally:
        srv.terminate()
        srv.wait()
    return {f"{x['test']} {x['size']}": x["value"] for x in json.loads(r.stdout)["results"] if x["unit"] == "MiB/s"}


def perftest_limits(seconds):
    """Debian's perftest on the same devices, connected through rdma_cm."""
    out = {}
    for tool in ("ib_write_bw", "ib_read_bw"):
        for size in (65536, 1 << 20):
            report = os.path.join(RESULTS, f"{tool}-{size}.json")
            # A count, not -D: in duration mode a 1 MiB ib_write_bw on rxe reports 0.
            n = max(50, int(seconds * (100 << 20) / size))
            base = [tool, "-R", "-s", str(size), "-n", str(n), "-F"]
            # Under TCG perftest now and then reports 0.00 for a run that
            # moved its data (seen once in CI for 1 MiB writes): tried 3 times.
            for _ in range(3):
                srv = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    time.sleep(1)
                    subprocess.run(base + ["--out_json", f"--out_json_file={report}", IP], capture_output=True,
                                   timeout=120, check=True)
                finally:
                    try:
                        srv.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        srv.kill()
                # perftest 4.5's --out_json file is JSON-like, with unquoted names.
                m = re.search(r"BW_average:\s*([0-9.]+)", open(report).read())
                if m and float(m.group(1)) > 0:
                    break
            else:
                raise RuntimeError(f"{tool}: no bandwidth in {report}, 3 tries")
            out[f"{tool} {'1 MiB' if size == 1 << 20 else '64 KiB'}"] = float(m.group(1))
    return out


def vs_kernel(cells):
    """Each cell over the kernel's own client and server doing the same job
    over the same transport: bandwidth (the same ratio as IOPS), p99 latency
    and guest CPU per GiB."""
    base = {(c["transport"], c["workload"], c["bs"], c["iodepth"]): c for c in cells
            if c["client"] == "kernel" and c["server"] == "kernel" and "error" not in c}
    for c in cells:
        b = base.get((c["transport"], c["workload"], c["bs"], c["iodepth"]))
        if "error" in c or not b:
            continue
        div = lambda x, y: x / y if y else None
        c["vs_kernel"] = {"bw": div(c["bw_MiBps"]["median"], b["bw_MiBps"]["median"]),
                          "p99": div(c["lat_us"]["p99"], b["lat_us"]["p99"]),
                          "cpu": div(c["cpu_guest_s_per_GiB"], b["cpu_guest_s_per_GiB"])}


def environment():
    mem = next(int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "memory_MiB": mem, "fio": fio,
            "rdma": f"soft-RoCE (rdma_rxe) on a veth pair, MTU 9000, inside QEMU with TCG emulation ({model})",
            "servers": "both export a tmpfs; nfsd with 8 threads and 1 MiB transfers",
            "mounts": "NFSv3, fio with libaio and O_DIRECT; the engine talks to the server itself"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(matrix.GUEST_PRESETS), default="kernel")
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--repeats", type=int)
    a = ap.parse_args()
    guest_environment()
    p = dict(matrix.GUEST_PRESETS[a.preset])
    p.update({k: v for k, v in (("seconds", a.seconds), ("repeats", a.repeats)) if v})
    os.makedirs(os.path.join(RESULTS, "fio"), exist_ok=True)
    result = {"preset": a.preset, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": p["seconds"],
              "repeats": p["repeats"], "environment": environment(), "cells": [], "metadata": [],
              "limits": {}, "limit_units": UNITS, "unavailable": []}
    for name, fn in (("fabric_bench", fabric_limits), ("perftest", perftest_limits)):
        try:
            result["limits"][name] = fn(p["seconds"])
            log(f"{name}: " + ", ".join(f"{k} {v:.0f} {UNITS[name]}" for k, v in result["limits"][name].items()))
        except Exception as e:
            result["unavailable"].append({"name": f"{name} on verbs", "why": str(e)[:200]})
    # The data file every job reads and writes, on each server's export.
    for export, _, _ in SERVERS.values():
        subprocess.run(["dd", "if=/dev/zero", f"of={export}/data", "bs=1M", f"count={p['size_MiB']}",
                        "status=none"], check=True)
    if p.get("smallfiles"):
        spec = p["smallfiles"]
        work = os.path.join("/tmp", "smallfiles")
        os.makedirs(work, exist_ok=True)
        inputs = smallfiles.Inputs(spec, work)
        result["smallfiles"] = {"inputs": inputs.describe(), "export_options": "rw,no_root_squash,sync (tmpfs)",
                                "repeats": spec["repeats"], "ops_n": spec["ops"], "ops": {}, "_inputs": inputs,
                                "workloads": smallfiles.workloads(inputs, {"export dir": SERVERS["nfsrdma"][0]},
                                                                  spec["repeats"], log)}
    plan = [(c, s, t) for s in SERVERS for t in ("rdma", "tcp") for c in CLIENTS]
    total, t0 = len(plan) * len(p["jobs"]), time.time()

    def step(c):
        el = int(time.time() - t0)
        what = (f"{c['bw_MiBps']['median']:7.1f} MiB/s {c['iops']['median']:8.0f} IOPS" if "error" not in c
                else f"failed: {c['error'][:70]}")
        log(f"[{len(result['cells']):3d}/{total} {el // 60:02d}:{el % 60:02d}] {c['client']:6} -> {c['server']:7} "
            f"{c['transport']:4} {matrix.LABEL.get(c['workload'], c['workload']):10} {c['bs']:>3} "
            f"QD{c['iodepth']:<2} {what}")

    for client, server, transport in plan:
        series(client, server, transport, p, result, step)
    vs_kernel(result["cells"])
    result.get("smallfiles", {}).pop("_inputs", None)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    with open(os.path.join(RESULTS, "kernel.json"), "w") as f:
        json.dump(result, f, indent=1)
    failed = [c for c in result["cells"] if "error" in c]
    log(f"kernel comparison: {len(result['cells']) - len(failed)} cells measured, {len(failed)} failed")


if __name__ == "__main__":
    main()
