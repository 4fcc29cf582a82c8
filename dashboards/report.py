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
import ab_section  # noqa: E402
import host_charts  # noqa: E402
import kernel_section  # noqa: E402
import notes  # noqa: E402
import smallfiles_section  # noqa: E402
import transfer_section  # noqa: E402
import verdict  # noqa: E402
from style import LABEL, cell_name, cpu_per_call, fmt, prose, series_name  # noqa: E402

CHART_JS = ["/usr/share/javascript/chart.js/chart.min.js", "/usr/share/nodejs/chart.js/dist/chart.min.js"]


def table(r):
    lines = host_table(r) if r["cells"] or r["peers"] or r.get("transfer") or r.get("smallfiles") else []
    lines += ab_section.table(r.get("ab"), r["repeats"])
    if "kernel" in r:
        lines += kernel_section.table(r["kernel"])
        lines += smallfiles_section.table(r["kernel"].get("smallfiles"))
    return "\n".join(lines)


def host_table(r):
    head = (f"{'transport':<9} {'path':<7} {'workload':<11} {'bs':>3} {'QD':>3} {'MiB/s':>8} {'IOPS':>9} "
            f"{'p99 us':>8} {'cli s/GiB':>9} {'srv s/GiB':>9} {'us/call c / s':>15} {'vs limit':>16} {'vs local':>8}")
    medians = " (medians)" if r["repeats"] > 1 else ""
    lines = [f"nfsrdma bench, preset {r['preset']}, {r['host']['provider']} provider, {r['host']['network']}, "
             f"{r['seconds']:g} s x {r['repeats']} per cell{medians}", head, "-" * len(head)]
    for c in r["cells"] + r["peers"]:
        if "error" in c:
            lines.append(f"{c['server']:<9} {c['path']:<7} {LABEL[c['workload']]:<11} failed: {c['error'][:60]}")
            continue
        lim = c.get("transport_limit")
        ratio = f"{lim['ratio']:.2f} {lim['label'][:11]}" if lim else "-"
        who = c.get("server", c["transport"])[:9]
        lines.append(f"{who:<9} {c['path']:<7} {LABEL[c['workload']]:<11} {c['bs']:>3} {c['iodepth']:>3} "
                     f"{c['bw_MiBps']['median']:>8.0f} {c['iops']['median']:>9.0f} {c['lat_us']['p99']:>8.0f} "
                     f"{fmt(c['cpu_client_s_per_GiB'], 2):>9} {c['cpu_server_s_per_GiB']:>9.2f} {cpu_per_call(c):>15} {ratio:>16} "
                     f"{fmt(c.get('storage_ratio'), 2):>8}")
    for t, m in r.get("metadata", {}).items():
        lock = m.get("lock", {})
        lines.append(f"metadata through the {t} mount, {m['files']} files: " + ", ".join(
            f"{k} {m[k]['per_s']:.0f}/s" for k in ("create", "stat", "unlink")) +
            (f", lock+unlock {lock['per_s']:.0f}/s" if "per_s" in lock else f", locks: {lock.get('error', 'not measured')}"))
    lines += transfer_section.table(r.get("transfer", []))
    lines += smallfiles_section.table(r.get("smallfiles"))
    for u in r.get("unavailable", []):
        lines.append(f"not measured: {u['name']}: {u['why']}")
    return lines + ([""] + verdict.sentences(r) if r["cells"] else [])


def spread(c):
    return f"{fmt(c['bw_MiBps']['min'])}–{fmt(c['bw_MiBps']['max'])}" if c.get("repeats", 1) >= 2 else "single run"


def limit(c):
    lim = c.get("transport_limit")
    return f"{lim['ratio']:.2f} of {html.escape(lim['label'])} {fmt(lim['value'])} {lim['unit']}" if lim else "-"


COLUMNS = [
    ("series", lambda c: html.escape(series_name(c))), ("cell", cell_name),
    ("MiB/s", lambda c: fmt(c["bw_MiBps"]["median"])), ("spread of MiB/s (min–max)", spread),
    ("IOPS", lambda c: fmt(c["iops"]["median"])),
    ("latency p50 / p99 / p99.9 µs", lambda c: " / ".join(fmt(c["lat_us"][p]) for p in ("p50", "p99", "p99.9"))),
    ("client CPU s/GiB", lambda c: fmt(c["cpu_client_s_per_GiB"], 2)),
    ("server CPU s/GiB", lambda c: fmt(c["cpu_server_s_per_GiB"], 2)),
    ("CPU µs per call, client / server", cpu_per_call),
    ("vs transport limit", limit), ("vs local", lambda c: fmt(c.get("storage_ratio"), 2)),
]


def html_table(r):
    """Every cell; the spread column only where some cell ran twice or more."""
    cells = r["cells"] + r["peers"]
    repeated = any(c.get("repeats", 1) >= 2 for c in cells if "error" not in c)
    cols = [(h, f) for h, f in COLUMNS if f is not spread or repeated]
    rows = []
    for c in cells:
        if "error" in c:
            rows.append(f"<tr><td>{html.escape(series_name(c))}</td><td>{cell_name(c)}</td>"
                        f"<td colspan={len(cols) - 2}>failed: {html.escape(c['error'])}</td></tr>")
        else:
            rows.append("<tr>" + "".join(f"<td>{f(c)}</td>" for _, f in cols) + "</tr>")
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h, _ in cols) + "</tr>" + "".join(rows) + "</table>"


def runs(r):
    if r["repeats"] == 1:
        return f"Each cell ran once, for {r['seconds']:g} s; every figure is from that single run."
    return f"Each cell ran {r['repeats']} times, {r['seconds']:g} s each; figures are medians."


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>nfsrdma bench: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 1em 0; }}
#verdict {{ background: #f4f7fb; border-left: 4px solid #1f77b4; padding: 0.2em 1.2em; max-width: 75em; }}
#verdict p {{ font-size: 15px; }}
table.verdict td, table.verdict th {{ text-align: left; }}
ul.notes li {{ max-width: 75em; margin-bottom: 0.5em; }}
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
<p>{started} to {finished}. {runs}</p>
{verdict}
<h2>Host</h2><dl>{host}</dl>
{host_sections}
{ab}
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
      scales: {{ y: Object.assign({{ title: {{ display: true, text: c.unit }} }}, c.y) }} }} }});
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
<h2>Charts</h2>{chart_notes}<div class="grid">{canvases}</div>
<h2>Every cell</h2>{table}
{transfer}
{smallfiles}"""


def write(r, path):
    host, chart_notes = host_charts.charts(r)
    k = r.get("kernel")
    kcharts = kernel_section.charts(k) if k and "error" not in k else []
    cs = [host_charts.with_axis(c) for c in host + kcharts]
    dl = lambda d: "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(str(v))}</dd>" for k, v in d.items())
    base = dict(r.get("baselines", {}).get("raw_rma_MiBps", {}))
    base = {f"raw RMA {k} (MiB/s)": f"{v:,.0f}" for k, v in base.items()}
    base.update({f"NULL calls/s at QD32 over {k}": f"{v:,.0f}" for k, v in r.get("baselines", {}).get("null_calls_per_s", {}).items()})
    unavailable = ""
    if r.get("unavailable"):
        unavailable = "<h2>Not measured on this host</h2><ul>" + "".join(
            f"<li>{html.escape(u['name'])}: {html.escape(u['why'])}</li>" for u in r["unavailable"]) + "</ul>"
    host_sections = HOST_SECTIONS.format(
        baselines=dl(base), table=html_table(r), transfer=transfer_section.section(r.get("transfer", [])),
        smallfiles=smallfiles_section.section(r.get("smallfiles"), "Small files"), chart_notes="".join(f"<p>{prose(n)}</p>" for n in chart_notes),
        canvases="".join(f'<div class="chart"><canvas id="chart{i}"></canvas></div>' for i in range(len(host))))
    page = PAGE.format(title=html.escape(r["host"]["hostname"]), chartjs=chart_js(), preset=html.escape(r["preset"]),
                       started=r["started"], finished=r.get("finished", "?"), runs=html.escape(runs(r)),
                       verdict=verdict.section(r) + notes.section(r) if r["cells"] else "",
                       host=dl(r["host"]), ab=ab_section.section(r.get("ab"), r["repeats"]), host_sections=host_sections if r["cells"] or r.get("transfer") or r.get("smallfiles") else "", unavailable=unavailable,
                       kernel=kernel_section.section(k, len(host), len(kcharts)) + smallfiles_section.section(
                           k.get("smallfiles"), "Small files in the guest") if k else "",
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
