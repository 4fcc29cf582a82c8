"""The verdict at the top of the report: RPC-RDMA against TCP, and ours against
the peers, as ratios of figures measured in the same run. Each ratio is the
geometric mean, over the jobs both sides ran, of one side's median over the
other's; the tables give the range over those jobs too."""
import html
import math

from style import SMALL_BS, ok, prose, size_name

SAME = 0.03  # ratios within 3% of 1 read as on par
PATHS = {"engine": "fio engine", "fuse": "FUSE mount"}


def cpu(c):
    return None if c["cpu_client_s_per_GiB"] is None else c["cpu_client_s_per_GiB"] + c["cpu_server_s_per_GiB"]


# key, what is divided, a cell's figure, which block sizes, whether higher is better
RDMA_TCP = [
    ("bw", "bandwidth, large blocks", lambda c: c["bw_MiBps"]["median"], lambda bs: bs != SMALL_BS, True),
    ("iops", f"IOPS, {size_name(SMALL_BS)} blocks", lambda c: c["iops"]["median"], lambda bs: bs == SMALL_BS, True),
    ("cpu", "CPU seconds per GiB, client + server", cpu, lambda bs: True, False),
]
# key, name, what is divided, [(ours, theirs)] as (server, path, transport): "ours" is
# nfsrdma-server through this run's own clients. Bandwidth, for the jobs both ran.
PEERS = [
    ("nfs-ganesha", "nfs-ganesha", "nfsrdma-server ÷ nfs-ganesha, the same client over TCP",
     [(("ours", "fuse", "tcp"), ("ganesha", "fuse", "tcp")),
      (("nfsrdma-server", "libnfs", "tcp"), ("ganesha", "libnfs", "tcp"))]),
    ("kernel-nfs", "kernel NFS", "nfsrdma-fuse ÷ the kernel's NFS client, both on nfsrdma-server",
     [(("ours", "fuse", t), ("nfsrdma-server", f"kernel-{t}", t)) for t in ("tcp", "rdma")]),
    ("libnfs", "fio's libnfs engine", "the nfsrdma fio engine ÷ fio's libnfs engine, both on nfsrdma-server over TCP",
     [(("ours", "engine", "tcp"), ("nfsrdma-server", "libnfs", "tcp"))]),
]
UNAVAILABLE = {"nfs-ganesha": "nfs-ganesha", "kernel NFS": "kernel nfs", "fio's libnfs engine": "fio nfs engine"}


def who(c):
    return c.get("server", "ours"), c["path"], c["transport"]


def paired(r, pairs, value, keep=lambda bs: True):
    """value(ours) / value(theirs) for every job both sides of a pair ran."""
    cells = {(who(c), c["workload"], c["bs"], c["iodepth"]): c for c in r["cells"] + r["peers"] if ok(c)}
    out = []
    for a, b in pairs:
        for (w, *job), c in cells.items():
            d = cells.get((b, *job))
            if w == a and d and keep(job[1]) and value(c) and value(d):
                out.append(value(c) / value(d))
    return out


def summary(ratios):
    if not ratios:
        return None
    return {"mean": math.exp(sum(map(math.log, ratios)) / len(ratios)), "lo": min(ratios), "hi": max(ratios),
            "n": len(ratios)}


def reading(s, higher_better, ours, theirs):
    if s is None:
        return "not measured"
    g = s["mean"]
    if abs(g - 1) <= SAME:
        return f"on par, within {SAME:.0%}"
    if not higher_better:
        return f"{ours} uses {g - 1:.0%} more CPU per GiB" if g > 1 else f"{ours} uses {1 - g:.0%} less CPU per GiB"
    return f"{ours} {g - 1:.0%} faster" if g > 1 else f"{theirs} {1 / g - 1:.0%} faster"


def times(s):
    return "-" if s is None else f"{s['mean']:.2f}×"


def rdma_tcp(r, paths=tuple(PATHS)):
    """{key: summary} of RDMA ÷ TCP over the jobs of the given client paths."""
    return {key: summary(paired(r, [(("ours", p, "rdma"), ("ours", p, "tcp")) for p in paths], value, keep))
            for key, _, value, keep, _ in RDMA_TCP}


def peers(r):
    """[(key, name, what, summary or None, why not)]."""
    out = []
    for key, name, what, pairs in PEERS:
        s = summary(paired(r, pairs, lambda c: c["bw_MiBps"]["median"]))
        out.append((key, name, what, s, None if s else why_not(r, name, pairs)))
    return out


def why_not(r, name, pairs):
    failed = [c for c in r["peers"] if "error" in c and who(c) in {b for _, b in pairs}]
    if failed:
        return f"every run failed: {failed[0]['error'][:120]}"
    for u in r.get("unavailable", []):
        if u["name"] == "peers":
            return (f"not measured in this preset ({r['preset']}); `make bench` (preset full) measures them "
                    "where the host has them")
        if u["name"].lower().startswith(UNAVAILABLE[name]):
            return f"not measured: {u['why']}"
    return "not measured in this run"


def sentences(r):
    s = rdma_tcp(r)
    bw, iops, c = (s[k] for k in ("bw", "iops", "cpu"))
    out = [f"RPC-RDMA ÷ TCP, over the jobs of the fio engine and the FUSE mount together: bandwidth with large blocks "
           f"{times(bw)} ({reading(bw, True, 'RDMA', 'TCP')}), IOPS with {size_name(SMALL_BS)} blocks {times(iops)} "
           f"({reading(iops, True, 'RDMA', 'TCP')}), CPU per GiB {times(c)} ({reading(c, False, 'RDMA', 'TCP')})."]
    every = [x for x in (bw, iops) if x]
    if every:
        lo, hi = min(x["lo"] for x in every), max(x["hi"] for x in every)
        split = " (neither transport is ahead in every job)" if lo < 1 - SAME and hi > 1 + SAME else ""
        noise = ("each cell ran once, so run-to-run noise is not measured" if r["repeats"] == 1 else
                 f"each figure is the median of {r['repeats']} runs")
        out.append(f"Job by job the throughput ratio runs from {lo:.2f}× to {hi:.2f}×{split}, and {noise}.")
    out.append(peers_sentence(r))
    out.append(transport_sentence(r["host"]))
    return out


def peers_sentence(r):
    parts, missing = [], {}
    for _, name, _, s, why in peers(r):
        if s:
            parts.append(f"ours ÷ {name} {times(s)} ({reading(s, True, 'ours', name)})")
        else:
            missing.setdefault(why, []).append(name)
    for why, names in missing.items():
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        verb = (" was " if len(names) == 1 else " were ") if why.startswith("not measured") else ": "
        parts.append(listed + verb + why)
    return "Against peers, on bandwidth: " + "; ".join(parts) + "."


def transport_sentence(host):
    where = host.get("network", "the network")
    if host.get("provider") == "tcp":
        return (f"Both transports run over TCP sockets on {where} here (RPC-RDMA through libfabric's tcp provider), "
                "so these ratios compare nfsrdma's two software paths, not RDMA hardware against TCP.")
    return f"RPC-RDMA ran on libfabric's {host.get('provider')} provider over {where}."


def cell(s):
    if s is None:
        return "<td>-</td>"
    return (f'<td title="{s["n"]} job(s), {s["lo"]:.2f}× to {s["hi"]:.2f}×">{times(s)} '
            f'<small>({s["lo"]:.2f}–{s["hi"]:.2f}, {s["n"]} jobs)</small></td>')


def rdma_tcp_table(r):
    per_path = {p: rdma_tcp(r, (p,)) for p in PATHS}
    both = rdma_tcp(r)
    rows = []
    for key, what, _, _, higher in RDMA_TCP:
        mean = "" if both[key] is None else f' data-value="{both[key]["mean"]:.4f}"'
        rows.append(f'<tr data-key="rdma-tcp-{key}"{mean}><td>{html.escape(what)}</td>'
                    + "".join(cell(per_path[p][key]) for p in PATHS) + cell(both[key])
                    + f"<td>{html.escape(reading(both[key], higher, 'RDMA', 'TCP'))}</td></tr>")
    return ("<table class=verdict><tr><th>RDMA ÷ TCP</th>" + "".join(f"<th>{n}</th>" for n in PATHS.values())
            + "<th>both</th><th>reading</th></tr>" + "".join(rows) + "</table>")


def peers_table(r):
    rows = []
    for key, name, what, s, why in peers(r):
        if s:
            rows.append(f'<tr data-key="peer-{key}" data-value="{s["mean"]:.4f}"><td>{html.escape(what)}</td>{cell(s)}'
                        f"<td>{html.escape(reading(s, True, 'ours', name))}</td></tr>")
        else:
            rows.append(f'<tr data-key="peer-{key}"><td>{html.escape(what)}</td><td colspan=2>{prose(why)}</td></tr>')
    return ("<table class=verdict><tr><th>ours ÷ peer, bandwidth</th><th>ratio</th><th>reading</th></tr>"
            + "".join(rows) + "</table>")


def section(r):
    return ('<section id="verdict"><h2>Verdict</h2>' + "".join(f"<p>{prose(s)}</p>" for s in sentences(r))
            + "<h3>Key ratios, from this run's medians</h3>" + rdma_tcp_table(r) + peers_table(r) + "</section>")
