"""The "against the kernel" part of the report and of the printed table: the
soft-RoCE guest's cells (bench/compare/guest.py) as ratios to the kernel's own
client and server doing the same job over the same transport, RDMA over TCP
for each implementation, and CPU per GiB side by side."""
import html
import math

from style import COLORS, LABEL, ok

CLIENT = {"kernel": "kernel client", "fuse": "nfsrdma-fuse", "engine": "fio engine"}
SERVER = {"kernel": "kernel nfsd", "nfsrdma": "nfsrdma-server"}
PAIRS = [(c, s) for c in ("kernel", "fuse", "engine") for s in ("kernel", "nfsrdma")]
CAVEAT = ("The RDMA here is soft-RoCE (the kernel's rdma_rxe) on a veth pair inside a QEMU guest under TCG "
          "emulation: every RDMA operation is done in software by the guest's two emulated CPUs, which also run "
          "both clients and both servers. Only ratios between cells of this run carry meaning; the absolute figures "
          "do not. On RDMA NICs the transport's costs differ: the NIC does in hardware what soft-RoCE does here on "
          "the CPU, so RDMA's advantage over TCP is understated here and the software around it weighs more.")


def pair_name(client, server):
    return f"{CLIENT[client]} → {SERVER[server]}"


def job_name(c):
    return f"{LABEL.get(c['workload'], c['workload'])} {c['bs']} QD{c['iodepth']}"


def index(k):
    """{(client, server, transport, job name): cell} and the job names in order."""
    cells, jobs = {}, []
    for c in k.get("cells", []):
        j = job_name(c)
        if j not in jobs:
            jobs.append(j)
        cells[(c["client"], c["server"], c["transport"], j)] = c
    return cells, jobs


def ratio(a, b, key=lambda c: c["bw_MiBps"]["median"]):
    if not (ok(a) and ok(b)) or not key(b):
        return None
    return key(a) / key(b)


def fx(v):
    return "-" if v is None else f"{v:.2f}×"


def td(text, title=""):
    t = f' title="{html.escape(title)}"' if title else ""
    return f"<td{t}>{html.escape(text)}</td>"


def figure(c):
    if not ok(c):
        return "failed: " + c["error"] if c else "not run"
    return f"{c['bw_MiBps']['median']:,.1f} MiB/s, {c['iops']['median']:,.0f} IOPS, p99 {c['lat_us']['p99']:,.0f} µs"


def geomean(values):
    v = [x for x in values if x]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def summary(k):
    """{(client, server, transport): (bandwidth ratio, CPU ratio)}: geometric
    means over the jobs of each cell's ratios to the kernel's."""
    out = {}
    for c in k.get("cells", []):
        if ok(c) and "vs_kernel" in c and (c["client"], c["server"]) != ("kernel", "kernel"):
            out.setdefault((c["client"], c["server"], c["transport"]), []).append(c["vs_kernel"])
    return {key: (geomean(v["bw"] for v in vs), geomean(v["cpu"] for v in vs)) for key, vs in out.items()}


def summary_table(k):
    s = summary(k)
    rows = []
    for c, srv in PAIRS[1:]:
        cols = []
        for t in ("rdma", "tcp"):
            bw, cpu = s.get((c, srv, t), (None, None))
            cols += [td(fx(bw)), td(fx(cpu))]
        rows.append("<tr>" + td(pair_name(c, srv)) + "".join(cols) + "</tr>")
    return ("<h3>In one line each: geometric means over the jobs</h3><table><tr><th>client → server</th>"
            "<th>RDMA: bandwidth ÷ kernel</th><th>RDMA: CPU/GiB ÷ kernel</th><th>TCP: bandwidth ÷ kernel</th>"
            "<th>TCP: CPU/GiB ÷ kernel</th></tr>" + "".join(rows) + "</table>")


def vs_kernel_tables(cells, jobs, transports):
    out = []
    for t in transports:
        head = "<tr><th>job</th><th>kernel client → kernel nfsd</th>" + "".join(
            f"<th>{html.escape(pair_name(c, s))}</th>" for c, s in PAIRS[1:]) + "</tr>"
        rows = []
        for j in jobs:
            base = cells.get(("kernel", "kernel", t, j))
            row = [td(j), td(figure(base))]
            row += [td(fx(ratio(cells.get((c, s, t, j)), base)), figure(cells.get((c, s, t, j)))) for c, s in PAIRS[1:]]
            rows.append("<tr>" + "".join(row) + "</tr>")
        out.append(f"<h3>Over {'RPC-RDMA' if t == 'rdma' else 'TCP'}: bandwidth ÷ the kernel's</h3>"
                   f"<table>{head}{''.join(rows)}</table>")
    return "".join(out)


def rdma_over_tcp_table(cells, jobs):
    head = "<tr><th>job</th>" + "".join(f"<th>{html.escape(pair_name(c, s))}</th>" for c, s in PAIRS) + "</tr>"
    rows = []
    for j in jobs:
        row = [td(j)]
        for c, s in PAIRS:
            r, t = cells.get((c, s, "rdma", j)), cells.get((c, s, "tcp", j))
            row.append(td(fx(ratio(r, t)), f"RDMA: {figure(r)}; TCP: {figure(t)}"))
        rows.append("<tr>" + "".join(row) + "</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def cpu_tables(cells, jobs, transports):
    out = []
    for t in transports:
        head = "<tr><th>job</th>" + "".join(f"<th>{html.escape(pair_name(c, s))}</th>" for c, s in PAIRS) + "</tr>"
        rows = []
        for j in jobs:
            row = [td(j)]
            for c, s in PAIRS:
                x = cells.get((c, s, t, j))
                row.append(td(f"{x['cpu_guest_s_per_GiB']:.1f} ({x['cpu_server_s_per_GiB']:.1f})" if ok(x) else "-"))
            rows.append("<tr>" + "".join(row) + "</tr>")
        out.append(f"<h3>Over {'RPC-RDMA' if t == 'rdma' else 'TCP'}: guest CPU seconds per GiB "
                   f"(the server's own threads in brackets)</h3><table>{head}{''.join(rows)}</table>")
    return "".join(out)


def lock_phrase(m):
    l = m.get("lock", {})
    return f"lock+unlock {l['per_s']:.0f}/s" if "per_s" in l else f"locks: {l.get('error', 'not measured')}"


def metadata_table(k):
    meta = k.get("metadata", [])
    if not meta:
        return ""
    base = {m["transport"]: m for m in meta if m["client"] == "kernel" and m["server"] == "kernel" and "error" not in m}
    rows = []
    for m in meta:
        name = f"{pair_name(m['client'], m['server'])} over {m['transport']}"
        if "error" in m:
            rows.append(f"<tr>{td(name)}<td colspan=4>failed: {html.escape(m['error'])}</td></tr>")
            continue
        b = base.get(m["transport"])
        cols = []
        for op in ("create", "stat", "unlink"):
            r = m[op]["per_s"] / b[op]["per_s"] if b else None
            cols.append(td(f"{m[op]['per_s']:,.0f}/s ({fx(r)})",
                           f"client {m[op]['client_cpu_us']:.0f} µs, server {m[op]['server_cpu_us']:.0f} µs per file"))
        lock, blk = m.get("lock", {}), (b or {}).get("lock", {})
        if "per_s" in lock:
            r = lock["per_s"] / blk["per_s"] if "per_s" in blk else None
            cols.append(td(f"{lock['per_s']:,.0f}/s ({fx(r)})", f"client {lock['client_cpu_us']:.0f} µs, server "
                           f"{lock['server_cpu_us']:.0f} µs per lock+unlock"))
        else:
            cols.append(td(lock.get("error", "not measured")))
        rows.append("<tr>" + td(name) + "".join(cols) + "</tr>")
    files = next((m["files"] for m in meta if "files" in m), "?")
    return (f"<h3>Metadata: create, stat and unlink of {files} files, and uncontended lock+unlock round trips, "
            "through each mount (÷ the kernel's own over the same transport)</h3><table><tr><th>mount</th>"
            "<th>create</th><th>stat</th><th>unlink</th><th>lock+unlock</th></tr>"
            + "".join(rows) + "</table>")


def charts(k):
    cells, jobs = index(k)
    out = []
    for t in ("rdma", "tcp"):
        sets = []
        for i, (c, s) in enumerate(PAIRS[1:]):
            data = [ratio(cells.get((c, s, t, j)), cells.get(("kernel", "kernel", t, j))) for j in jobs]
            sets.append({"label": pair_name(c, s), "data": data, "backgroundColor": COLORS[i + 1],
                         "borderColor": COLORS[i + 1]})
        out.append({"title": f"Bandwidth ÷ the kernel client on the kernel nfsd, over {t}", "type": "bar",
                    "unit": "ratio", "labels": jobs, "datasets": sets})
        sets = []
        for i, (c, s) in enumerate(PAIRS):
            data = [cells[(c, s, t, j)]["cpu_guest_s_per_GiB"] if ok(cells.get((c, s, t, j))) else None for j in jobs]
            sets.append({"label": pair_name(c, s), "data": data, "backgroundColor": COLORS[i], "borderColor": COLORS[i]})
        out.append({"title": f"Guest CPU seconds per GiB, over {t}", "type": "bar", "unit": "s/GiB", "labels": jobs,
                    "datasets": sets})
    return [c for c in out if any(v is not None for d in c["datasets"] for v in d["data"])]


def section(k, first_canvas, n_charts):
    """The HTML section; its charts are canvases first_canvas.. of the page."""
    parts = ["<h2>Against the kernel</h2>", f"<p><strong>{html.escape(CAVEAT)}</strong></p>"]
    if "error" in k:
        return "".join(parts) + f"<p>Not measured: {html.escape(k['error'])}</p>"
    cells, jobs = index(k)
    transports = [t for t in ("rdma", "tcp") if any(key[2] == t for key in cells)]
    env = dict(k.get("environment", {}))
    env["run"] = f"{k.get('started', '?')} to {k.get('finished', '?')}, {k['seconds']:g} s x {k['repeats']} per cell"
    for tool, lim in k.get("limits", {}).items():
        for name, v in lim.items():
            env[f"{tool}: {name}"] = f"{v:,.0f} {k.get('limit_units', {}).get(tool, 'MiB/s')}"
    for u in k.get("unavailable", []):
        env[f"not measured: {u['name']}"] = u["why"]
    parts.append("<dl>" + "".join(f"<dt>{html.escape(str(a))}</dt><dd>{html.escape(str(b))}</dd>"
                                  for a, b in env.items()) + "</dl>")
    parts.append("<p>Every ratio divides by the kernel's NFS client on the kernel's nfsd running the same fio job over "
                 "the same transport, in the same guest boot; above 1 is faster than the kernel. Bandwidth and IOPS "
                 "give the same ratio. Hover a ratio for the figures behind it. CPU is the whole guest's busy time "
                 "over the run, the same measure for every cell.</p>")
    parts.append(summary_table(k))
    parts.append(vs_kernel_tables(cells, jobs, transports))
    parts.append("<h3>RDMA ÷ TCP, for each client and server</h3>" + rdma_over_tcp_table(cells, jobs))
    parts.append(cpu_tables(cells, jobs, transports))
    parts.append(metadata_table(k))
    parts.append('<div class="grid">' + "".join(
        f'<div class="chart"><canvas id="chart{first_canvas + i}"></canvas></div>' for i in range(n_charts)) + "</div>")
    return "".join(parts)


def table(k):
    """The plain-text lines printed after a run."""
    if "error" in k:
        return [f"kernel comparison: {k['error']}"]
    lines = ["", f"against the kernel (soft-RoCE in an emulated guest: only the ratios mean anything), "
                 f"{k['seconds']:g} s x {k['repeats']} per cell",
             f"{'client -> server':<32} {'over':<4} {'job':<18} {'MiB/s':>8} {'IOPS':>8} {'p99 us':>8} "
             f"{'CPU s/GiB':>9} {'srv s/GiB':>9} {'vs kernel':>9} {'CPU vs k':>8}"]
    for c in k.get("cells", []):
        who = f"{CLIENT[c['client']]} -> {SERVER[c['server']]}"
        if not ok(c):
            lines.append(f"{who:<32} {c['transport']:<4} {job_name(c):<18} failed: {c['error'][:70]}")
            continue
        v = c.get("vs_kernel", {})
        lines.append(f"{who:<32} {c['transport']:<4} {job_name(c):<18} {c['bw_MiBps']['median']:>8.1f} "
                     f"{c['iops']['median']:>8.0f} {c['lat_us']['p99']:>8.0f} {c['cpu_guest_s_per_GiB']:>9.2f} "
                     f"{c['cpu_server_s_per_GiB']:>9.2f} {fx(v.get('bw')):>9} {fx(v.get('cpu')):>8}")
    for (c, srv, t), (bw, cpu) in sorted(summary(k).items()):
        lines.append(f"{CLIENT[c]} -> {SERVER[srv]} over {t}, geometric mean over the jobs: bandwidth {fx(bw)} "
                     f"the kernel's, CPU per GiB {fx(cpu)}")
    for m in k.get("metadata", []):
        who = f"{CLIENT[m['client']]} -> {SERVER[m['server']]} over {m['transport']}"
        lines.append(f"metadata {who}: " + (f"failed: {m['error'][:70]}" if "error" in m else ", ".join(
            f"{op} {m[op]['per_s']:.0f}/s" for op in ("create", "stat", "unlink")) + ", " + lock_phrase(m)))
    return lines
