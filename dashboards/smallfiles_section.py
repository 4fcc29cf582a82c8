"""The small-file section of the report (bench/compare/smallfiles.py measures
it): each small-file operation's time, NFS calls and where the time goes, per
mount; and real programs on the export directory and through each mount, with
ratios to the export directory and, where the kernel's client ran beside
nfsrdma-fuse on the same server and transport, to the kernel's client."""
import html

BASE = "export dir"


def seconds(v):
    return f"{v:.2f}" if not isinstance(v, dict) else "failed"


def ratio(v, base):
    if isinstance(v, dict) or isinstance(base, dict) or not base:
        return None
    return v / base


def kernel_twin(target):
    """"fuse S T" -> "kernel S T": the kernel's client on the same server and transport."""
    return "kernel" + target[4:] if target.startswith("fuse ") else None


def describe(sf):
    i = sf["inputs"]
    return (f"tar -x of {i['tar_files']:,} files from {i['tree']}, rm -rf of them, rsync -a of {i['rsync_files']:,} "
            f"files from {i['rsync_tree']}, git clone of a {i['repo_files']:,}-file repository and git status twice "
            f"in it, {i['txns']:,} one-row SQLite transactions; export {sf['export_options']}; "
            f"medians of {sf['repeats']}")


def table(sf):
    if not sf:
        return []
    targets = list(next(iter(sf["workloads"].values())))
    w = max(len(t) for t in targets) + 9
    head = f"{'program':<14}" + "".join(f"{t:>{w}}" for t in targets)
    lines = ["", "small files: " + describe(sf) + "; seconds (x the export dir, k: x the kernel client)", head,
             "-" * len(head)]
    for prog, by in sf["workloads"].items():
        cells = []
        for t in targets:
            r, k = ratio(by[t], by.get(BASE)), ratio(by[t], by.get(kernel_twin(t) or "", {}))
            note = f" ({r:.1f}x)" if r and t != BASE else ""
            note += f" k{k:.2f}" if k else ""
            cells.append(seconds(by[t]) + note)
        lines.append(f"{prog:<14}" + "".join(f"{c:>{w}}" for c in cells))
    head = (f"{'mount':<22} {'operation':<19} {'us':>7} {'calls':>6} {'FUSE req':>8} {'outside calls':>14} "
            f"{'wire':>6} {'server':>7}")
    lines += ["", f"small-file operations, {sf['ops_n']} of each, 100-byte files: microseconds per operation, the NFS "
              "calls the server counted, where the time went", head, "-" * len(head)]
    f = lambda v: f"{v:.0f}" if v is not None else "-"
    f1 = lambda v: f"{v:.1f}" if v is not None else "-"
    for t, ops in sf["ops"].items():
        for op, v in ops.items():
            lines.append(f"{t:<22} {op:<19} {v['us']:>7.0f} {v['calls']:>6.1f} {f1(v.get('fuse_requests')):>8} "
                         f"{f(v['outside_us']):>14} "
                         f"{f(v['wire_us']):>6} {f(v['server_us']):>7}")
    return lines


def section(sf, title):
    if not sf:
        return ""
    targets = list(next(iter(sf["workloads"].values())))
    head = "".join(f"<th>{html.escape(t)}</th>" for t in targets)
    rows = []
    for prog, by in sf["workloads"].items():
        tds = []
        for t in targets:
            v = by[t]
            if isinstance(v, dict):
                tds.append(f"<td title='{html.escape(v['error'])}'>failed</td>")
                continue
            r, k = ratio(v, by.get(BASE)), ratio(v, by.get(kernel_twin(t) or "", {}))
            extra = (f" <small>({r:.1f}×)</small>" if r and t != BASE else "") + (
                f" <small>[{k:.2f}× kernel]</small>" if k else "")
            tds.append(f"<td>{v:.2f}{extra}</td>")
        rows.append(f"<tr><td>{html.escape(prog)}</td>{''.join(tds)}</tr>")
    f = lambda v: f"{v:,.0f}" if v is not None else "–"
    ops = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{html.escape(op)}</td><td>{v['us']:,.0f}</td><td>{v['calls']:.1f}</td>"
        f"<td>{'–' if v.get('fuse_requests') is None else format(v['fuse_requests'], '.1f')}</td>"
        f"<td>{f(v['outside_us'])}</td><td>{f(v['wire_us'])}</td><td>{f(v['server_us'])}</td></tr>"
        for t, o in sf["ops"].items() for op, v in o.items())
    return (f"<h2>{html.escape(title)}</h2><p>Real programs: {html.escape(describe(sf))}. Seconds; in brackets, the ratio to "
            "the same program on the export directory itself and, where the kernel's NFS client ran on the same "
            "server and transport, to it.</p>"
            f"<table><tr><th>program</th>{head}</tr>{''.join(rows)}</table>"
            f"<p>Each operation {sf['ops_n']:,} times on 100-byte files: microseconds per operation, the NFS calls "
            "the server counted per operation, the requests the kernel's FUSE layer made of nfsrdma-fuse per "
            "operation, and where the time went: outside NFS calls (the kernel's VFS and, "
            "for nfsrdma-fuse, FUSE layer and the daemon), on the wire and in the transports (the client's time in "
            "calls less the server's), in the server. A dash: that side keeps no such time.</p>"
            "<table><tr><th>mount</th><th>operation</th><th>µs</th><th>calls</th><th>FUSE requests</th>"
            "<th>outside calls µs</th>"
            f"<th>wire µs</th><th>server µs</th></tr>{ops}</table>")
