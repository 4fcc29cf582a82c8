#!/usr/bin/env python3
"""nfsrdma comparison harness: RPC-RDMA vs TCP, the fio engine vs the FUSE
mount, against the transport limit (raw libfabric RMA, NULL calls) and the
storage limit (the export read and written locally), with peers where the
host has them. The kernel presets run inside the soft-RoCE guest instead: the
kernel's NFS client and nfsd against ours, over RDMA and TCP (guest.py); the
full preset adds a short one where QEMU runs. The ab preset compares two
builds, cell by cell in turn (ab.py). Writes results.json and report.html and
prints a table.

  bench/compare/run.py [--preset quick|full|engine|peers|transfer|smallfiles|smoke|kernel|kernel-quick|
                        kernel-smallfiles|kernel-smoke]
                       [--build build] [--out DIR]
  bench/compare/run.py --preset ab --base OLD-BUILD [--build build] [--cells randread:4k:32,...]
                       [--transports rdma,tcp] [--jobs 1] [--batch] [--repeats 3] [--seconds 8] [--workdir /var/tmp]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402
import harness  # noqa: E402
import kernel  # noqa: E402
import matrix  # noqa: E402
import metadata  # noqa: E402
import peers  # noqa: E402
import smallfiles  # noqa: E402
import transfer  # noqa: E402


def host_description(h):
    """The machine, and the provider and export options `h` (a harness.Host) ran with."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    return {"hostname": platform.node(), "kernel": platform.release(), "cpu": cpu, "cpus": os.cpu_count(),
            "memory_MiB": mem, "fio": fio, "provider": h.provider, "export_options": h.export_options,
            "network": "loopback"}


class Progress:
    def __init__(self, total):
        self.total, self.done, self.t0 = total, 0, time.time()

    def step(self, what):
        self.done += 1
        el = int(time.time() - self.t0)
        print(f"[{self.done:3d}/{self.total}  {el // 60:02d}:{el % 60:02d}] {what}", file=sys.stderr, flush=True)


def measure(h, args, out, repeats, rw, watch, server_pid=None, p_seconds=5):
    """Runs one cell `repeats` times: medians and spread of bandwidth and IOPS,
    latency percentiles of the median run, and CPU seconds per GiB for the
    client (fio and every watched process but the server) and the server."""
    server_pid = server_pid or h.server.pid
    runs = []
    for i in range(repeats):
        path = f"{out}.{i}.json"
        _, own, others = harness.run_measured(args, path, watch=watch, timeout=p_seconds * 20 + 60)
        s = harness.fio_summary(path, rw)
        gib = s["io_bytes"] / 2**30 or 1e-9
        s["cpu_client_s_per_GiB"] = (own + sum(v for pid, v in others.items() if pid != server_pid)) / gib
        s["cpu_server_s_per_GiB"] = others.get(server_pid, 0) / gib
        runs.append(s)
    return harness.summarise(runs, ("cpu_client_s_per_GiB", "cpu_server_s_per_GiB"))


def baselines(h, transports, seconds):
    out = os.path.join(h.work, "raw.json")
    with open(out, "w") as f:
        subprocess.run([f"{h.build}/bench/fabric_bench", "--provider", h.provider, "--peer", h.addr,
                        "--port", str(h.fab_port), "--seconds", str(seconds), "--depth", "16", "--json"],
                       stdout=f, check=True)
    raw = {}
    for x in json.load(open(out))["results"]:
        if x["unit"] == "MiB/s":
            op = "write" if "Write" in x["test"] else "read"
            raw[(op, {"64 KiB": "64k", "1 MiB": "1M"}.get(x["size"], x["size"]))] = x["value"]
    null = {}
    for t in transports:
        r = subprocess.run([f"{h.build}/bench/nfs_bench", "--server", f"{h.addr}:{h.export}", "--proto", t,
                            "--port", str(h.port_for(t)), "--mount-port", str(h.mount_port), "--provider",
                            h.provider, "--op", "null", "--depth", "32", "--seconds", str(seconds), "--json"],
                           capture_output=True, text=True, check=True)
        null[t] = json.loads(r.stdout)["iops"]
    return raw, null


def host_smallfiles(h, spec, mounts):
    """Small files through each mount (smallfiles.py): each operation with its
    calls and the time split from both sides' metrics, and the real programs
    on the export directory and through the mounts."""
    inputs = smallfiles.Inputs(spec, h.work)
    out = {"inputs": inputs.describe(), "export_options": h.export_options, "repeats": spec["repeats"],
           "ops_n": spec["ops"], "ops": {}}
    server = lambda: smallfiles.metrics_calls(h.metrics, "server")
    for t, (mnt, _) in mounts.items():
        out["ops"][f"fuse {t}"] = smallfiles.per_op(mnt, spec["ops"], server,
                                                   lambda: smallfiles.metrics_calls(h.client_metrics[t], "client"),
                                                   lambda: smallfiles.fuse_requests(h.client_metrics[t]))
        print(f"small-file operations over {t}: " + ", ".join(
            f"{op} {v['us']:.0f} µs {v['calls']:.1f} calls {v['fuse_requests']:.1f} FUSE requests" for op, v in out["ops"][f"fuse {t}"].items()),
            file=sys.stderr)
    targets = {"export dir": h.export, **{f"fuse {t}": mnt for t, (mnt, _) in mounts.items()}}
    out["workloads"] = smallfiles.workloads(inputs, targets, spec["repeats"], log=lambda m: print(m, file=sys.stderr))
    return out


def host_run(a, p, out, engine):
    """The host's matrix: every cell of preset p, baselines, metadata, peers."""
    h = harness.Host(a.build, a.provider, addr=a.server_address)
    try:
        h.start_server(p.get("export_options", "rw,no_root_squash,async"))
        h.start_fabric_bench()
        result = {"preset": a.preset, "started": datetime.datetime.now().isoformat(timespec="seconds"),
                  "host": host_description(h), "seconds": p["seconds"], "repeats": p["repeats"], "cells": [],
                  "peers": [], "unavailable": []}
        raw, null = baselines(h, p["transports"], p["seconds"])
        result["baselines"] = {"raw_rma_MiBps": {f"{op} {bs}": v for (op, bs), v in raw.items()},
                               "null_calls_per_s": null}
        mounts = {t: h.mount(t) for t in p["transports"]} if "fuse" in p["paths"] else {}
        for t, (mnt, _) in mounts.items():
            how = f"RPC-RDMA, libfabric {h.provider} provider" if t == "rdma" else "TCP"
            print(f"mounted {h.addr}:{h.export} on {mnt} over {how}", file=sys.stderr)
        # Lay each transport's file out once (through the engine), and one for the local baseline.
        for t in p["transports"] if p["cells"] else ():
            matrix.lay_out(matrix.engine_args(h, engine, t, f"data-{t}"), p["size"])
        if p["cells"]:
            matrix.lay_out(matrix.file_args(os.path.join(h.export, "data-local")), p["size"])
        plan = [(t, path, c) for c in p["cells"] for t in p["transports"] for path in p["paths"]]
        plan += [("local", "local", c) for c in p["cells"]]
        if a.fio_client:
            plan += [(t, "remote", c) for c in p["cells"] for t in p["transports"]]
            result["host"]["fio_clients"] = a.fio_client
        peer_plan = peers.plan(a.preset, p) if p["peers"] else []
        prog = Progress(len(plan) + len(peer_plan) + transfer.steps(p))
        for t, path, (rw, bs, depth) in plan:
            name = f"{t}-{path}-{rw}-{bs}-qd{depth}"
            common = matrix.fio_common(name, rw, bs, depth, p["seconds"], p["size"])
            watch = [h.server.pid]
            if path == "engine":
                args = matrix.engine_args(h, engine, t, f"data-{t}") + common
            elif path == "fuse":
                mnt, fuse = mounts[t]
                args = matrix.file_args(os.path.join(mnt, f"data-{t}")) + common
                watch.append(fuse.pid)
            elif path == "remote":
                # fio's client/server mode: the same engine job on every client host at once.
                job = matrix.job_file(os.path.join(h.work, name + ".fio"),
                                      matrix.engine_args(h, engine, t, f"data-{t}") + common)
                args = ["fio", "--output-format=json"] + [x for c in a.fio_client for x in (f"--client={c}", job)]
            else:
                args = matrix.file_args(os.path.join(h.export, "data-local")) + common
            cell = {"transport": t, "path": path, "workload": rw, "bs": bs, "iodepth": depth}
            if path == "remote":
                cell["clients"] = a.fio_client
            cell.update(measure(h, args, os.path.join(h.work, name), p["repeats"], rw, watch, p_seconds=p["seconds"]))
            if path == "remote":
                cell["cpu_client_s_per_GiB"] = None  # spent on the client hosts, not measured from here
            base = matrix.transport_baseline(raw, null, t, rw, bs) if t != "local" else None
            if base:
                v = cell["iops"]["median"] if base[1] == "IOPS" else cell["bw_MiBps"]["median"]
                cell["transport_limit"] = {"value": base[0], "unit": base[1], "label": base[2], "ratio": v / base[0]}
            result["cells"].append(cell)
            prog.step(f"{t:5} {path:6} {matrix.LABEL[rw]:10} {bs:>3} QD{depth:<2}  "
                      f"{cell['bw_MiBps']['median']:8.0f} MiB/s {cell['iops']['median']:9.0f} IOPS")
        local = {(c["workload"], c["bs"], c["iodepth"]): c for c in result["cells"] if c["path"] == "local"}
        for c in result["cells"]:
            l = local.get((c["workload"], c["bs"], c["iodepth"]))
            if c["path"] != "local" and l and l["bw_MiBps"]["median"] > 0:
                c["storage_ratio"] = c["bw_MiBps"]["median"] / l["bw_MiBps"]["median"]
        # Metadata through each mount: creates, stats and unlinks of `files` files.
        result["metadata"] = {}
        for t, (mnt, fuse) in mounts.items():
            m = metadata.measure(mnt, p.get("files", 10000), {
                "client": lambda: harness.cpu_seconds(fuse.pid), "server": lambda: harness.cpu_seconds(h.server.pid)})
            result["metadata"][t] = m
            print(f"metadata over {t}: {m['files']} files: " + ", ".join(
                f"{k} {m[k]['per_s']:.0f}/s" for k in ("create", "stat", "unlink")) + ", " + metadata.lock_text(m),
                file=sys.stderr)
        if p.get("smallfiles"):
            result["smallfiles"] = host_smallfiles(h, p["smallfiles"], mounts)
        if p.get("transfer_jobs"):
            result["transfer"] = transfer.run(a, p, engine, measure, prog)
        peers.run(h, peer_plan, result, prog, p, measure)
        result["unavailable"] += peers.unavailable(p["peers"])
        result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    finally:
        h.stop()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(matrix.PRESETS) + sorted(matrix.GUEST_PRESETS) + ["ab"],
                    default="quick")
    ap.add_argument("--build", default="build", help="meson build directory (default: build)")
    ap.add_argument("--out", help="directory for results.json and report.html (default: BUILD/bench/<time>)")
    ap.add_argument("--provider", default="tcp", help="libfabric provider (default: tcp)")
    ap.add_argument("--repeats", type=int, help="override the preset's repeats (ab: rounds, default 3)")
    ap.add_argument("--seconds", type=float, help="override the preset's seconds per run (ab: default 8)")
    ap.add_argument("--fio-client", action="append", default=[], metavar="HOST",
                    help="run the fio engine jobs on HOST through fio's client/server mode (`fio --server` "
                         "running there); repeatable. The FUSE path and peers stay on this host")
    ap.add_argument("--server-address", default="127.0.0.1",
                    help="address the server listens on, reachable from every --fio-client (default: 127.0.0.1)")
    ap.add_argument("--peers", action=argparse.BooleanOptionalAction, default=None,
                    help="measure nfs-ganesha, fio's libnfs engine and kernel NFS where present "
                         "(default: only in the full preset)")
    ap.add_argument("--kernel", action=argparse.BooleanOptionalAction, default=None,
                    help="add the short kernel comparison in the soft-RoCE guest (default: in the full preset, "
                         "where QEMU runs)")
    ab_args = ap.add_argument_group("ab preset (two builds in turn)")
    ab_args.add_argument("--base", metavar="BUILD", help="the build directory to compare --build with")
    ab_args.add_argument("--cells", help=f"workload:bs:depth,... through the fio engine (default: {ab.DEFAULT_CELLS})")
    ab_args.add_argument("--transports", help="rdma,tcp (default: both)")
    ab_args.add_argument("--jobs", type=int, default=1, help="fio jobs, each with its own connection (default: 1)")
    ab_args.add_argument("--batch", action="store_true",
                         help="fio submits and reaps up to each cell's depth at once (iodepth_batch_submit, "
                              "iodepth_batch_complete_max), which the engine sends together (default: one by one)")
    ab_args.add_argument("--workdir", help="where the export lives (default: /var/tmp); its filesystem matters")
    a = ap.parse_args()
    if (a.preset == "ab") != bool(a.base):
        ap.error("--base goes with --preset ab, and --preset ab needs it")
    for opt, check in (("--cells", lambda: a.cells and ab.parse_cells(a.cells)),
                       ("--transports", lambda: a.transports and ab.parse_transports(a.transports))):
        try:
            check()
        except ValueError as e:
            ap.error(f"{opt}: {e}")
    if a.preset != "ab" and (a.cells or a.transports or a.workdir or a.jobs != 1 or a.batch):
        ap.error("--cells, --transports, --jobs, --batch and --workdir go with --preset ab")
    if a.jobs < 1 or (a.repeats is not None and a.repeats < 1) or (a.seconds is not None and a.seconds <= 0):
        ap.error("--jobs and --repeats must be 1 or more, --seconds above 0")
    if os.geteuid() != 0:
        sys.exit("bench/compare: needs root (the server, FUSE mounts, network namespaces)")
    engine = os.path.abspath(f"{a.build}/fio-engine/nfsrdma.so")
    if not os.path.exists(engine):
        sys.exit(f"bench/compare: {engine} is not built (make build)")
    out = os.path.abspath(a.out or os.path.join(a.build, "bench", datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    os.makedirs(out, exist_ok=True)
    if a.preset == "ab":
        result = {"preset": "ab", "started": datetime.datetime.now().isoformat(timespec="seconds"),
                  "cells": [], "peers": [], "unavailable": [], "repeats": a.repeats or 3, "seconds": a.seconds or 8}
        result["host"] = host_description(argparse.Namespace(provider=a.provider, export_options=ab.EXPORT_OPTIONS))
        result["ab"] = ab.run(a, measure, lambda m: print(m, file=sys.stderr, flush=True))
        result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    elif a.preset in matrix.GUEST_PRESETS:
        ok, why = kernel.available()
        if not ok:
            sys.exit(f"bench/compare: the kernel comparison {why}")
        result = {"preset": a.preset, "started": datetime.datetime.now().isoformat(timespec="seconds"),
                  "host": {"hostname": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count()},
                  "cells": [], "peers": [], "unavailable": []}
        result["kernel"] = kernel.run(a.build, a.preset, out, a.seconds, a.repeats)
        result["seconds"], result["repeats"] = result["kernel"].get("seconds", 0), result["kernel"].get("repeats", 0)
        result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    else:
        p = dict(matrix.PRESETS[a.preset])
        if a.repeats:
            p["repeats"] = a.repeats
        if a.seconds:
            p["seconds"] = a.seconds
        if a.peers is not None:
            p["peers"] = a.peers
        result = host_run(a, p, out, engine)
        if a.kernel if a.kernel is not None else p.get("kernel", p["peers"]):
            ok, why = kernel.available()
            if ok:
                result["kernel"] = kernel.run(a.build, "kernel-quick", out)
            else:
                result["unavailable"].append({"name": "kernel comparison (soft-RoCE guest)", "why": why})
    json_path = os.path.join(out, "results.json")
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dashboards"))
    import report  # noqa: E402
    html = report.write(result, os.path.join(out, "report.html"))
    print(report.table(result))
    print(f"\nresults: {json_path}\nreport:  {html}")
    if "error" in result.get("kernel", {}) and a.preset in matrix.GUEST_PRESETS:
        sys.exit(f"bench/compare: {result['kernel']['error']}")


if __name__ == "__main__":
    main()
