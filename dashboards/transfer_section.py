"""The transfer-size section of the report: the same sequential engine jobs
on a server offering 1 MiB READs and WRITEs and on one offering 4 MiB
(bench/compare/transfer.py measures them)."""
import html

from style import LABEL


def rows(cells):
    """(transport, workload, bs, MiB/s on the 1 MiB server, on the 4 MiB one,
    ratio, server CPU s/GiB on each) per job."""
    by = {(c["transport"], c["workload"], c["bs"], c["transfer"]): c for c in cells}
    out = []
    for (t, rw, bs, label), c in by.items():
        if label != "1 MiB" or (t, rw, bs, "4 MiB") not in by:
            continue
        big = by[(t, rw, bs, "4 MiB")]
        one, four = c["bw_MiBps"]["median"], big["bw_MiBps"]["median"]
        out.append((t, rw, bs, one, four, four / one if one else 0,
                    c["cpu_server_s_per_GiB"], big["cpu_server_s_per_GiB"]))
    return out


def table(cells):
    if not cells:
        return []
    head = (f"{'transport':<9} {'workload':<11} {'bs':>3} {'1 MiB srv':>10} {'4 MiB srv':>10} {'ratio':>6} "
            f"{'srv s/GiB 1M / 4M':>18}")
    lines = ["", f"transfer sizes: the fio engine at QD{cells[0]['iodepth']}, MiB/s against a server offering 1 MiB and one "
             "offering 4 MiB", head, "-" * len(head)]
    for t, rw, bs, one, four, ratio, c1, c4 in rows(cells):
        lines.append(f"{t:<9} {LABEL[rw]:<11} {bs:>3} {one:>10.0f} {four:>10.0f} {ratio:>6.2f} "
                     f"{c1:>8.2f} / {c4:<7.2f}")
    return lines


def section(cells):
    if not cells:
        return ""
    body = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{LABEL[rw]}</td><td>{bs}</td><td>{one:,.0f}</td><td>{four:,.0f}</td>"
        f"<td>{ratio:.2f}</td><td>{c1:.2f}</td><td>{c4:.2f}</td></tr>"
        for t, rw, bs, one, four, ratio, c1, c4 in rows(cells))
    return (f"<h2>Transfer sizes</h2><p>The fio engine at QD{cells[0]['iodepth']}, sequential, against two servers side by side: one "
            "offering 1 MiB READs and WRITEs in FSINFO (the default), one offering 4 MiB (<code>--rtmax</code>, "
            "<code>--wtmax</code>). A 4 MiB block goes as one call to the second and as four to the first. "
            "Medians, MiB/s; the server's CPU seconds per GiB moved.</p>"
            "<table><tr><th>transport</th><th>workload</th><th>block</th><th>1 MiB server</th><th>4 MiB server</th>"
            f"<th>ratio</th><th>server s/GiB (1 MiB)</th><th>server s/GiB (4 MiB)</th></tr>{body}</table>")
