"""Transfer sizes: sequential jobs of 1 MiB and 4 MiB blocks through the fio
engine against two servers side by side, one offering 1 MiB READs and WRITEs
in FSINFO (the default) and one offering 4 MiB (--rtmax/--wtmax 4194304).
The engine sends a block as one call where the server allows it and splits it
into calls of the server's size where not, so the 4 MiB server's gain (or
loss) is the ratio of the same job on the two, measured in turn in one run."""
import os

import harness
import matrix

SERVERS = {"1 MiB": 1 << 20, "4 MiB": 4 << 20}
DEPTH = 4  # 16 MiB in flight at 4 MiB blocks: the 4 MiB server's buffers for one connection


def run(a, p, engine, measure, prog):
    """Cells for every transport and job of p["transfer_jobs"], each on both
    servers in turn; a list of dicts like the host matrix's, with "transfer"."""
    hosts = {}
    cells = []
    try:
        for label, size in SERVERS.items():
            h = harness.Host(a.build, a.provider, addr=a.server_address)
            hosts[label] = h
            h.start_server(extra=["--rtmax", str(size), "--wtmax", str(size)])
            for t in p["transports"]:
                matrix.lay_out(matrix.engine_args(h, engine, t, f"data-{t}"), p["size"])
        for t in p["transports"]:
            for rw, bs in p["transfer_jobs"]:
                for label, h in hosts.items():
                    name = f"transfer-{label.replace(' ', '')}-{t}-{rw}-{bs}"
                    args = matrix.engine_args(h, engine, t, f"data-{t}") + matrix.fio_common(
                        name, rw, bs, DEPTH, p["seconds"], p["size"])
                    c = {"transport": t, "transfer": label, "workload": rw, "bs": bs, "iodepth": DEPTH}
                    c.update(measure(h, args, os.path.join(h.work, name), p["repeats"], rw, [h.server.pid],
                                     p_seconds=p["seconds"]))
                    cells.append(c)
                    prog.step(f"{t:5} {label} server {matrix.LABEL[rw]:10} {bs:>3} QD{DEPTH}  "
                              f"{c['bw_MiBps']['median']:8.0f} MiB/s")
    finally:
        for h in hosts.values():
            h.stop()
    return cells


def steps(p):
    return len(p["transports"]) * len(p.get("transfer_jobs", ())) * len(SERVERS)
