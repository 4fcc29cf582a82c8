"""The two-builds section of the report (run.py --preset ab, bench/compare/ab.py):
each cell's medians with the base build and with the new one, and new / base."""
import html

from style import LABEL, fmt

# (heading, in the plain table, key in a side's figures, digits)
FIGURES = [("IOPS", "IOPS", "iops", 0), ("MiB/s", "MiB/s", "bw_MiBps", 0),
           ("server CPU µs/call", "srv µs", "cpu_server_us_per_call", 1),
           ("fio CPU µs/call", "fio µs", "cpu_client_us_per_call", 1)]


def value(side, key):
    v = side[key]
    return v["median"] if isinstance(v, dict) else v


def ratio_of(cell, key):
    return cell["new_over_base"][key]


def title(ab, repeats):
    return (f"two builds in turn: base {ab['base']['commit']} ({ab['base']['build']}), new {ab['new']['commit']} "
            f"({ab['new']['build']}); the fio engine x{ab['jobs']}" +
            (", I/Os submitted and reaped in batches" if ab.get("batch") else "") + f", {ab['provider']} provider, " +
            (f"medians of {repeats} rounds" if repeats > 1 else "one round"))


def table(ab, repeats):
    if not ab:
        return []
    head = f"{'cell':<24}" + "".join(f"{h + ' base':>12}{'new':>10}{'ratio':>6}" for _, h, _, _ in FIGURES)
    lines = [title(ab, repeats) + "; ratio: new / base", head, "-" * len(head)]
    for c in ab["cells"]:
        name = f"{c['transport']} {LABEL[c['workload']]} {c['bs']} QD{c['iodepth']}"
        if "error" in c:
            lines.append(f"{name:<24} failed: {c['error'][:80]}")
            continue
        row = f"{name:<24}"
        for _, _, key, digits in FIGURES:
            row += (f"{fmt(value(c['base'], key), digits):>12}{fmt(value(c['new'], key), digits):>10}"
                    f"{fmt(ratio_of(c, key), 2):>6}")
        lines.append(row)
    return lines


def section(ab, repeats):
    if not ab:
        return ""
    head = "<tr><th>cell</th>" + "".join(f"<th>{h}: base</th><th>new</th><th>new / base</th>" for h, _, _, _ in FIGURES) + "</tr>"
    rows = []
    for c in ab["cells"]:
        if "error" in c:
            rows.append(f"<tr><td>{html.escape(c['transport'])} {LABEL[c['workload']]} {html.escape(c['bs'])} "
                        f"QD{c['iodepth']}</td><td colspan={3 * len(FIGURES)}>failed: {html.escape(c['error'])}</td></tr>")
            continue
        cells = "".join(f"<td>{fmt(value(c['base'], k), d)}</td><td>{fmt(value(c['new'], k), d)}</td>"
                        f"<td>{fmt(ratio_of(c, k), 2)}</td>" for _, _, k, d in FIGURES)
        rows.append(f"<tr><td>{html.escape(c['transport'])} {LABEL[c['workload']]} {html.escape(c['bs'])} "
                    f"QD{c['iodepth']}</td>{cells}</tr>")
    return (f"<h2>Two builds</h2><p>{html.escape(title(ab, repeats))}. Each cell ran with the base build's server "
            "and engine, then the new build's, on the same file, round after round; CPU per call counts the "
            "server's process and fio's (the engine in it).</p><table>" + head + "".join(rows) + "</table>")
