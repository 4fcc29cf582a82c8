"""Two builds in one run (`run.py --preset ab --base BUILD`): each cell
(transport, workload, block size, depth) runs with the base build's server and
fio engine, then with the new build's, on the same export file, round after
round, so both sides see the same load on a shared machine. Each side's
figures are medians over the rounds: IOPS, MiB/s, and CPU microseconds per
call in the server and in fio (with the engine); CPU per call is the steadier
figure when runs are short."""
import collections
import json
import os
import subprocess

import harness
import matrix

DEFAULT_CELLS = "randread:4k:32,randwrite:4k:32"
# A server's default, as nfsd's: a WRITE's data is on disk before it is answered
# (UNSTABLE ones aside, which fio's engine sends).
EXPORT_OPTIONS = "rw,no_root_squash"


def bytes_of(bs):
    """fio's block size ("4k", "1M", "65536") in bytes; ValueError otherwise."""
    units = {"k": 1 << 10, "m": 1 << 20}
    s = bs.lower()
    n = int(s[:-1]) * units[s[-1]] if s and s[-1] in units else int(s)
    if n <= 0:
        raise ValueError(bs)
    return n


def parse_cells(text):
    """"rw:bs:depth,..." -> [(rw, bs, depth)]; ValueError naming what is wrong."""
    cells = []
    for item in text.split(","):
        parts = item.strip().split(":")
        ok = len(parts) == 3 and parts[0] in matrix.WORKLOADS and parts[2].isdigit() and int(parts[2]) > 0
        try:
            ok = ok and bytes_of(parts[1]) > 0
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"'{item}' is not workload:bs:depth (workload one of {', '.join(matrix.WORKLOADS)}, "
                             "bs like 4k or 1M, depth above 0)")
        cells.append((parts[0], parts[1], int(parts[2])))
    return cells


def parse_transports(text):
    transports = text.split(",") if text else ["rdma", "tcp"]
    if not transports or any(t not in ("rdma", "tcp") for t in transports):
        raise ValueError(f"'{text}' is not a list of rdma and tcp")
    return transports


def lay_out(path, size=256 << 20):
    """The file every cell reads and writes, written through the page cache
    and flushed: no side starts on a cold file, or under its writeback."""
    with open(path, "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())


def commit_of(build):
    """The source commit a build directory was configured from, or '?'."""
    try:
        info = json.load(open(os.path.join(build, "meson-info", "meson-info.json")))
        src = info["directories"]["source"]
        r = subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"], capture_output=True, text=True)
        return r.stdout.strip() or "?"
    except (OSError, KeyError, ValueError):
        return "?"


def check_build(build):
    for f in ("server/nfsrdma-server", "fio-engine/nfsrdma.so"):
        if not os.path.exists(os.path.join(build, f)):
            raise SystemExit(f"bench/compare: {build}/{f} is not built (ninja -C {build} {f})")


def batch_args(batch, depth):
    """fio submitting and reaping up to `depth` I/Os at once (one engine
    commit sends them together), or, by default, each on its own."""
    return [f"--iodepth_batch_submit={depth}", f"--iodepth_batch_complete_max={depth}"] if batch else []


def per_call_us(s_per_gib, bs):
    return s_per_gib * bytes_of(bs) / 2**30 * 1e6


def run(a, measure, log):
    """The A/B result: {"base": {...}, "new": {...}, "cells": [...]}, each
    cell with both sides' medians and new / base."""
    builds = {"base": os.path.abspath(a.base), "new": os.path.abspath(a.build)}
    for b in builds.values():
        check_build(b)
    cells = parse_cells(a.cells or DEFAULT_CELLS)
    transports = parse_transports(a.transports)
    repeats, seconds = a.repeats or 3, a.seconds or 8
    h = harness.Host(a.build, a.provider, workdir=a.workdir)
    runs, failed = collections.defaultdict(list), {}
    try:
        laid_out = False
        for rnd in range(repeats):
            for t in transports:
                for rw, bs, depth in cells:
                    for who in ("base", "new"):
                        h.build = builds[who]
                        server = h.start_server(EXPORT_OPTIONS)
                        if not laid_out:
                            lay_out(os.path.join(h.export, "data"))
                            laid_out = True
                        name = f"{rnd}-{t}-{rw}-{bs}-qd{depth}-{who}"
                        args = (matrix.engine_args(h, os.path.join(builds[who], "fio-engine/nfsrdma.so"), t, "data") +
                                matrix.fio_common(name, rw, bs, depth, seconds, "256M") +
                                [f"--numjobs={a.jobs}", "--group_reporting"] + batch_args(a.batch, depth))
                        try:
                            s = measure(h, args, os.path.join(h.work, name), 1, rw, [server.pid], p_seconds=seconds)
                        except RuntimeError as e:  # the other runs still count; this one is said and left out
                            log(f"round {rnd + 1}/{repeats} {t:4} {matrix.LABEL[rw]:10} {bs:>3} QD{depth:<3} {who:4} "
                                f"failed: {e}")
                            failed[(t, rw, bs, depth, who)] = str(e)
                            continue
                        finally:
                            h.stop_process(server)
                        runs[(t, rw, bs, depth, who)].append({
                            "iops": s["iops"]["median"], "bw_MiBps": s["bw_MiBps"]["median"],
                            "lat_us": s["lat_us"],
                            "cpu_server_us_per_call": per_call_us(s["cpu_server_s_per_GiB"], bs),
                            "cpu_client_us_per_call": per_call_us(s["cpu_client_s_per_GiB"], bs)})
                        log(f"round {rnd + 1}/{repeats} {t:4} {matrix.LABEL[rw]:10} {bs:>3} QD{depth:<3} {who:4} "
                            f"{s['iops']['median']:9.0f} IOPS {s['bw_MiBps']['median']:8.0f} MiB/s")
    finally:
        h.stop()
    keys = ("cpu_server_us_per_call", "cpu_client_us_per_call")
    out = {"base": {"build": builds["base"], "commit": commit_of(builds["base"])},
           "new": {"build": builds["new"], "commit": commit_of(builds["new"])},
           "jobs": a.jobs, "batch": a.batch, "provider": a.provider, "cells": []}
    for t in transports:
        for rw, bs, depth in cells:
            cell = {"transport": t, "workload": rw, "bs": bs, "iodepth": depth}
            if not all(runs[(t, rw, bs, depth, who)] for who in ("base", "new")):
                cell["error"] = next(failed[k] for k in failed if k[:4] == (t, rw, bs, depth))
                out["cells"].append(cell)
                continue
            for who in ("base", "new"):
                cell[who] = harness.summarise(runs[(t, rw, bs, depth, who)], keys)
            ratio = lambda f: f(cell["new"]) / f(cell["base"]) if f(cell["base"]) else None
            cell["new_over_base"] = {"iops": ratio(lambda c: c["iops"]["median"]),
                                     "bw_MiBps": ratio(lambda c: c["bw_MiBps"]["median"]),
                                     **{k: ratio(lambda c, k=k: c[k]) for k in keys}}
            out["cells"].append(cell)
    return out
