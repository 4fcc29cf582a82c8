#!/usr/bin/env python3
"""The HTML report of a bench/compare run: one self-contained file (Chart.js
from Debian's libjs-chart.js is inlined) that opens from disk. Also the plain
table the harness prints.

  dashboards/report.py results.json [report.html]
"""
import html
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_section  # noqa: E402
from style import COLORS, LABEL  # noqa: E402

CHART_JS = ["/usr/share/javascript/chart.js/chart.min.js", "/usr/share/nodejs/chart.js/dist/chart.min.js"]


def series_name(c):
    if c["path"] == "local":
        return "local disk (storage limit)"
    if c.get("server"):
        return f"{c['server']} via {c['path']} ({c['transport']})"
    if c["path"] == "remote":
        return f"{c['transport']} fio engine on {len(c['clients'])} client host(s)"
    return f"{c['transport']} {'fio engine' if c['path'] == 'engine' else 'FUSE mount'}"


def cell_name(c):
    return f"{LABEL[c['workload']]} {c['bs']} QD{c['iodepth']}"


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def table(r):
    lines = host_table(r) if r["cells"] or r["peers"] else []
    if "kernel" in r:
        lines += kernel_section.table(r["kernel"])
    return "\n".join(lines)


def host_table(r):
    head = (f"{'transport':<9} {'path':<7} {'workload':<11} {'bs':>3} {'QD':>3} {'MiB/s':>8} {'IOPS':>9} "
            f"{'p99 us':>8} {'cli s/GiB':>9} {'srv s/GiB':>9} {'vs limit':>16} {'vs local':>8}")
    lines = [f"nfsrdma bench, preset {r['preset']}, {r['host']['provider']} provider, {r['host']['network']}, "
             f"{r['seconds']:g} s x {r['repeats']} per cell (medians)", head, "-" * len(head)]
    for c in r["cells"] + r["peers"]:
        if "error" in c:
            lines.append(f"{c['server']:<9} {c['path']:<7} {LABEL[c['workload']]:<11} failed: {c['error'][:60]}")
            continue
        lim = c.get("transport_limit")
        ratio = f"{lim['ratio']:.2f} {lim['label'][:11]}" if lim else "-"
        who = c.get("server", c["transport"])[:9]
        lines.append(f"{who:<9} {c['path']:<7} {LABEL[c['workload']]:<11} {c['bs']:>3} {c['iodepth']:>3} "
                     f"{c['bw_MiBps']['median']:>8.0f} {c['iops']['median']:>9.0f} {c['lat_us']['p99']:>8.0f} "
                     f"{fmt(c['cpu_client_s_per_GiB'], 2):>9} {c['cpu_server_s_per_GiB']:>9.2f} {ratio:>16} "
                     f"{fmt(c.get('storage_ratio'), 2):>8}")
    for t, m in r.get("metadata", {}).items():
        lines.append(f"metadata through the {t} mount, {m['files']} files: " + ", ".join(
            f"{k} {m[k]['per_s']:.0f}/s" for k in ("create", "stat", "unlink")))
    for u in r.get("unavailable", []):
        lines.append(f"not measured: {u['name']}: {u['why']}")
    return lines


def datasets(cells, value):
    """One dataset per series, one point per cell name, in first-seen order."""
    names, series = [], {}
    for c in cells:
        if "error" in c:
            continue
        n = cell_name(c)
        if n not in names:
            names.append(n)
        series.setdefault(series_name(c), {})[n] = value(c)
    sets = [{"label": s, "data": [pts.get(n) for n in names], "backgroundColor": COLORS[i % len(COLORS)],
             "borderColor": COLORS[i % len(COLORS)]} for i, (s, pts) in enumerate(series.items())]
    return names, sets


def bar(title, unit, cells, value, log=False):
    labels, sets = datasets(cells, value)
    return {"title": title, "type": "bar", "unit": unit, "labels": labels, "datasets": sets, "log": log}


def by_block_size(r):
    out = []
    for wl in ("read", "write"):
        cells = [c for c in r["cells"] if c["workload"] == wl and c["iodepth"] == max(x["iodepth"] for x in r["cells"])]
        sizes = sorted({c["bs"] for c in cells}, key=lambda b: {"4k": 4, "64k": 64, "1M": 1024}.get(b, 0))
        series = {}
        for c in cells:
            series.setdefault(series_name(c), {})[c["bs"]] = c["bw_MiBps"]["median"]
        sets = [{"label": s, "data": [pts.get(b) for b in sizes], "borderColor": COLORS[i % len(COLORS)],
                 "backgroundColor": COLORS[i % len(COLORS)]} for i, (s, pts) in enumerate(series.items())]
        if sets:
            out.append({"title": f"{LABEL[wl]} bandwidth vs block size", "type": "line", "unit": "MiB/s",
                        "labels": sizes, "datasets": sets, "log": False})
    return out


def charts(r):
    cells = r["cells"]
    ours = [c for c in cells if c["path"] != "local"]
    out = by_block_size(r)
    out.append(bar("Bandwidth", "MiB/s", cells + r["peers"], lambda c: c["bw_MiBps"]["median"]))
    out.append(bar("IOPS", "IOPS", cells + r["peers"], lambda c: c["iops"]["median"], log=True))
    out.append(bar("Latency p50 (completion)", "µs", cells, lambda c: c["lat_us"]["p50"], log=True))
    out.append(bar("Latency p99 (completion)", "µs", cells, lambda c: c["lat_us"]["p99"], log=True))
    out.append(bar("Latency p99.9 (completion)", "µs", cells, lambda c: c["lat_us"]["p99.9"], log=True))
    out.append(bar("Client CPU seconds per GiB", "s/GiB", ours + r["peers"], lambda c: c["cpu_client_s_per_GiB"]))
    out.append(bar("Server CPU seconds per GiB", "s/GiB", ours + r["peers"], lambda c: c["cpu_server_s_per_GiB"]))
    out.append(bar("Ratio to the transport limit (raw RMA, or NULL calls for 4 KiB)", "ratio", ours,
                   lambda c: c.get("transport_limit", {}).get("ratio")))
    out.append(bar("Ratio to the storage limit (the export used locally)", "ratio", ours,
                   lambda c: c.get("storage_ratio")))
    meta = r.get("metadata", {})
    if meta:
        out.append({"title": f"Metadata through the mount ({next(iter(meta.values()))['files']} files)", "type": "bar",
                    "unit": "operations/s", "labels": ["create", "stat", "unlink"], "log": False,
                    "datasets": [{"label": f"{t} FUSE mount", "data": [m[k]["per_s"] for k in ("create", "stat", "unlink")],
                                  "backgroundColor": COLORS[i], "borderColor": COLORS[i]}
                                 for i, (t, m) in enumerate(meta.items())]})
    # A chart with no figure in it says nothing: leave it out.
    return [c for c in out if any(v is not None for d in c["datasets"] for v in d["data"])]


def html_table(r):
    rows = []
    for c in r["cells"] + r["peers"]:
        if "error" in c:
            rows.append(f"<tr><td>{html.escape(series_name(c))}</td><td>{cell_name(c)}</td>"
                        f"<td colspan=9>failed: {html.escape(c['error'])}</td></tr>")
            continue
        lim = c.get("transport_limit")
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in [
            html.escape(series_name(c)), cell_name(c), fmt(c["bw_MiBps"]["median"]),
            f"{fmt(c['bw_MiBps']['min'])}–{fmt(c['bw_MiBps']['max'])}", fmt(c["iops"]["median"]),
            f"{fmt(c['lat_us']['p50'])} / {fmt(c['lat_us']['p99'])} / {fmt(c['lat_us']['p99.9'])}",
            fmt(c["cpu_client_s_per_GiB"], 2), fmt(c["cpu_server_s_per_GiB"], 2),
            f"{lim['ratio']:.2f} of {html.escape(lim['label'])} {fmt(lim['value'])} {lim['unit']}" if lim else "-",
            fmt(c.get("storage_ratio"), 2)]) + "</tr>")
    return ("<table><tr><th>series</th><th>cell</th><th>MiB/s</th><th>spread</th><th>IOPS</th>"
            "<th>latency p50 / p99 / p99.9 µs</th><th>client CPU s/GiB</th><th>server CPU s/GiB</th>"
            "<th>vs transport limit</th><th>vs local</th></tr>" + "".join(rows) + "</table>")


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>nfsrdma bench: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
td:first-child, th:first-child, td:nth-child(2) {{ text-align: left; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 1.5em; }}
.chart {{ height: 340px; }}
dl {{ display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }}
</style>
<script>
window.reportErrors = [];
window.addEventListener("error", e => {{ window.reportErrors.push(String(e.message)); document.body && (document.body.dataset.errors = window.reportErrors.length); }});
</script>
<script>{chartjs}</script>
</head><body data-errors="0">
<h1>nfsrdma bench — preset {preset}</h1>
<p>{started} to {finished}. Each cell ran {seconds:g} s, {repeats} time(s); figures are medians, with the spread.</p>
<h2>Host</h2><dl>{host}</dl>
{host_sections}
{unavailable}
{kernel}
<script>
const charts = {charts};
let drawn = 0;
Chart.defaults.animation = false;
charts.forEach((c, i) => {{
  const ctx = document.getElementById("chart" + i);
  new Chart(ctx, {{ type: c.type, data: {{ labels: c.labels, datasets: c.datasets }},
    options: {{ responsive: true, maintainAspectRatio: false, animation: false,
      plugins: {{ title: {{ display: true, text: c.title }} }},
      scales: {{ y: {{ type: c.log ? "logarithmic" : "linear", title: {{ display: true, text: c.unit }} }} }} }} }});
}});
// Self-check for tests and readers alike: every canvas has ink on it.
charts.forEach((c, i) => {{
  const cv = document.getElementById("chart" + i);
  const px = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
  for (let k = 3; k < px.length; k += 4) if (px[k] !== 0) {{ drawn++; break; }}
}});
document.body.dataset.chartsTotal = charts.length;
document.body.dataset.chartsDrawn = drawn;
document.body.dataset.errors = window.reportErrors.length;
</script>
</body></html>
"""


def chart_js():
    for p in CHART_JS:
        if os.path.exists(p):
            return open(p).read().replace("</script", "<\\/script")
    raise SystemExit("dashboards/report.py: Chart.js not found (install Debian's libjs-chart.js)")


HOST_SECTIONS = """<p>Ratios divide by limits measured in the same run: the transport limit (raw libfabric RMA on
the same provider, or the NULL-call rate for 4 KiB blocks) and the storage limit (the same fio job on the export
directory itself).</p>
<h2>Baselines</h2><dl>{baselines}</dl>
<h2>Charts</h2><div class="grid">{canvases}</div>
<h2>Every cell</h2>{table}"""


def write(r, path):
    host = charts(r) if r["cells"] else []
    k = r.get("kernel")
    kcharts = kernel_section.charts(k) if k and "error" not in k else []
    cs = host + kcharts
    dl = lambda d: "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(str(v))}</dd>" for k, v in d.items())
    base = dict(r.get("baselines", {}).get("raw_rma_MiBps", {}))
    base = {f"raw RMA {k} (MiB/s)": f"{v:,.0f}" for k, v in base.items()}
    base.update({f"NULL calls/s over {k}": f"{v:,.0f}" for k, v in r.get("baselines", {}).get("null_calls_per_s", {}).items()})
    unavailable = ""
    if r.get("unavailable"):
        unavailable = "<h2>Not measured on this host</h2><ul>" + "".join(
            f"<li>{html.escape(u['name'])}: {html.escape(u['why'])}</li>" for u in r["unavailable"]) + "</ul>"
    host_sections = HOST_SECTIONS.format(
        baselines=dl(base), table=html_table(r),
        canvases="".join(f'<div class="chart"><canvas id="chart{i}"></canvas></div>' for i in range(len(host))))
    page = PAGE.format(title=html.escape(r["host"]["hostname"]), chartjs=chart_js(), preset=html.escape(r["preset"]),
                       started=r["started"], finished=r.get("finished", "?"), seconds=r["seconds"], repeats=r["repeats"],
                       host=dl(r["host"]), host_sections=host_sections if r["cells"] else "", unavailable=unavailable,
                       kernel=kernel_section.section(k, len(host), len(kcharts)) if k else "",
                       charts=json.dumps(cs).replace("</", "<\\/"))
    with open(path, "w") as f:
        f.write(page)
    return os.path.abspath(path)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    res = json.load(open(sys.argv[1]))
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(sys.argv[1]) or ".", "report.html")
    print(table(res))
    print("report:", write(res, out))
