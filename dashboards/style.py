"""What every part of the report names, formats and colours the same way."""
import html
import re

LABEL = {"read": "seq read", "write": "seq write", "randread": "rand read", "randwrite": "rand write"}
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
SMALL_BS = "4k"  # small blocks: counted in IOPS; the larger ones in MiB/s
SIZES = {"4k": "4 KiB", "64k": "64 KiB", "1M": "1 MiB"}  # in the order they grow


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


def size_name(bs):
    return SIZES.get(bs, bs)


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


BLOCK_BYTES = {"4k": 4096, "64k": 65536, "1M": 1 << 20}


def per_call_us(c, key):
    """CPU µs per call (one block) from a cell's CPU seconds per GiB."""
    v, bs = c.get(key), BLOCK_BYTES.get(c.get("bs"))
    return None if v is None or bs is None else v * bs / (1 << 30) * 1e6


def cpu_per_call(c):
    """'client / server' CPU µs per call."""
    return " / ".join(fmt(per_call_us(c, k), 1) for k in ("cpu_client_s_per_GiB", "cpu_server_s_per_GiB"))


def ok(c):
    return c is not None and "error" not in c


def prose(text):
    """A sentence as HTML: escaped, with `code` in <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
