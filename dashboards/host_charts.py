"""The charts of a host run: 4 KiB blocks in IOPS and larger blocks in MiB/s
on charts of their own, latency, CPU per GiB, the ratios to the limits,
metadata, and bandwidth against block size where a series has more than one.
Every chart's y axis comes from its figures (y_axis)."""
import math

from style import COLORS, LABEL, SIZES, SMALL_BS, cell_name, ok, series_name, size_name

SPAN = 20  # figures spanning more than this many times get a logarithmic axis


def y_axis(values):
    """Linear from zero; logarithmic when the figures span more than SPAN
    times, from a power of ten below half the smallest figure (so its bar is
    at least a third of a decade tall) to a round figure (1, 2 or 5 times a
    power of ten) at least half as much again as the largest."""
    v = [x for x in values if x is not None and x > 0]
    if not v or max(v) <= SPAN * min(v):
        return {"type": "linear", "min": 0, "grace": "5%"}
    top = 1.5 * max(v)
    power = 10 ** math.floor(math.log10(top))
    return {"type": "logarithmic", "min": 10 ** math.floor(math.log10(min(v) / 2)),
            "max": next(m * power for m in (1, 2, 5, 10) if m * power >= top)}


def with_axis(chart):
    return dict(chart, y=y_axis(v for d in chart["datasets"] for v in d["data"]))


def dataset(i, label, data):
    return {"label": label, "data": data, "backgroundColor": COLORS[i % len(COLORS)],
            "borderColor": COLORS[i % len(COLORS)]}


def bar(title, unit, cells, value):
    """One dataset per series, one bar per cell name, in first-seen order."""
    names, series = [], {}
    for c in cells:
        if cell_name(c) not in names:
            names.append(cell_name(c))
        series.setdefault(series_name(c), {})[cell_name(c)] = value(c)
    sets = [dataset(i, s, [pts.get(n) for n in names]) for i, (s, pts) in enumerate(series.items())]
    return {"title": title, "type": "bar", "unit": unit, "labels": names, "datasets": sets}


def sizes(cells):
    found = {c["bs"] for c in cells}
    return " and ".join(size_name(b) for b in list(SIZES) + sorted(found - set(SIZES)) if b in found)


def by_block_size(r, cells):
    """Bandwidth against block size, sequential jobs at the deepest queue: a
    line for each series measured at two block sizes or more, and a note for
    what that leaves out (one point is no line)."""
    depth = max(c["iodepth"] for c in cells)
    seq = [c for c in cells if c["workload"] in ("read", "write") and c["iodepth"] == depth]
    out, alone = [], []
    for wl in ("read", "write"):
        series = {}
        for c in seq:
            if c["workload"] == wl:
                series.setdefault(series_name(c), {})[c["bs"]] = c["bw_MiBps"]["median"]
        lines = {s: pts for s, pts in series.items() if len(pts) >= 2}
        alone += [f"{s} ({LABEL[wl]} {next(iter(pts))})" for s, pts in series.items() if len(pts) < 2]
        labels = [b for b in SIZES if any(b in pts for pts in lines.values())]
        sets = [dataset(i, s, [pts.get(b) for b in labels]) for i, (s, pts) in enumerate(lines.items())]
        if lines:
            out.append({"title": f"{LABEL[wl]} bandwidth vs block size, QD{depth}", "type": "line", "unit": "MiB/s",
                        "labels": [size_name(b) for b in labels], "datasets": sets})
    if not alone:
        return out, []
    if out:
        return out, ["Measured at one block size only, so left out of the block-size charts: " + ", ".join(alone) + "."]
    return out, [f"No bandwidth-against-block-size chart: the {r['preset']} preset measures one block size per "
                 f"workload ({sizes(seq)} for the sequential jobs), and one point is no curve. "
                 "`make bench` (preset full) measures several."]


def metadata(meta):
    ops = ("create", "stat", "unlink", "lock")
    sets = [dataset(i, f"{t} FUSE mount", [m.get(k, {}).get("per_s") for k in ops]) for i, (t, m) in enumerate(meta.items())]
    return {"title": f"Metadata through the mount ({next(iter(meta.values()))['files']} files)", "type": "bar",
            "unit": "operations/s (lock: lock+unlock pairs)", "labels": list(ops), "datasets": sets}


def charts(r):
    """(charts, notes): the host run's charts, and sentences on what is not drawn."""
    cells = [c for c in r["cells"] if ok(c)]
    if not cells:
        return [], []
    peers = [c for c in r["peers"] if ok(c)]
    every, ours = cells + peers, [c for c in cells if c["path"] != "local"]
    small = [c for c in every if c["bs"] == SMALL_BS]
    large = [c for c in every if c["bs"] != SMALL_BS]
    out, notes = by_block_size(r, cells)
    out.append(bar(f"Bandwidth, {sizes(large)} blocks", "MiB/s", large, lambda c: c["bw_MiBps"]["median"]))
    out.append(bar(f"IOPS, {size_name(SMALL_BS)} blocks", "IOPS", small, lambda c: c["iops"]["median"]))
    for p in ("p50", "p99", "p99.9"):
        out.append(bar(f"Latency {p} (completion)", "µs", cells, lambda c, p=p: c["lat_us"][p]))
    out.append(bar("Client CPU seconds per GiB", "s/GiB", ours + peers, lambda c: c["cpu_client_s_per_GiB"]))
    out.append(bar("Server CPU seconds per GiB", "s/GiB", ours + peers, lambda c: c["cpu_server_s_per_GiB"]))
    out.append(bar("Ratio to the transport limit (raw RMA, or NULL calls for 4 KiB)", "ratio", ours,
                   lambda c: c.get("transport_limit", {}).get("ratio")))
    out.append(bar("Ratio to the storage limit (the export used locally)", "ratio", ours,
                   lambda c: c.get("storage_ratio")))
    if r.get("metadata"):
        out.append(metadata(r["metadata"]))
    # A chart with no figure in it says nothing: leave it out.
    return [c for c in out if any(v is not None for d in c["datasets"] for v in d["data"])], notes
