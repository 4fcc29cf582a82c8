"""What a reader needs to know before trusting a host run's figures: what
"rdma" is on this host, where stat rates come from, what the FUSE write
figures include, and why "vs local" can exceed 1. Each follows what
bench/compare does (matrix.py's fio options, the mounts' defaults)."""
from style import prose

ACREGMIN_S = 3  # nfsrdma-fuse's default, which the harness leaves alone


def provider(host):
    p = host.get("provider", "?")
    if p == "tcp":
        return ("“rdma” in this report is RPC-over-RDMA on libfabric's tcp provider: the RPC-over-RDMA messages "
                "and the RMA (RDMA Read and Write) semantics travel over TCP sockets, here on "
                f"{host.get('network', 'this host')}. There is no RDMA hardware in these figures: they measure "
                "nfsrdma's RPC-RDMA code path, not what an RDMA NIC would do.")
    return (f"“rdma” in this report is RPC-over-RDMA on libfabric's {p} provider, on "
            f"{host.get('network', 'this host')}.")


def metadata(meta):
    took = {t: m["files"] / m["create"]["per_s"] for t, m in meta.items()}
    cached = ", ".join(f"{min(1, ACREGMIN_S / s):.0%} over {t}" for t, s in took.items())
    return ("Stat rates through a FUSE mount come in large part from the kernel's attribute cache, not from the "
            f"server: creating a file hands the kernel its attributes for acregmin ({ACREGMIN_S} s by default, which the "
            "harness keeps), and a stat inside that window never reaches nfsrdma-fuse; only files created earlier "
            "cost a GETATTR. Here the create phase took "
            + ", ".join(f"{s:.1f} s over {t}" for t, s in took.items())
            + f", and stat walks the files in the order they were created, so the cache answered roughly the files "
            f"created in its last {ACREGMIN_S} s: a share of about {cached}. Create and unlink reach the server "
            "every time.")


def writes():
    return ("FUSE write figures include write-behind: nfsrdma-fuse answers a write once the data is copied into its "
            "buffers (64 chunks of wsize for large writes, 512 of 64 KiB for small ones) and sends the WRITE "
            "afterwards; writers wait only when the buffers are full, so over a run the figure follows what the server "
            "takes, but the last writes, still on their way when the timing stops, are counted before the server has "
            "them. The fio jobs open the file with O_DIRECT (direct=1, libaio), which keeps the kernel's page cache "
            "out but not this write-behind, and set no end_fsync: the COMMIT that close(2) sends comes after fio's "
            "timed runtime, so it is in no bandwidth, IOPS or latency figure (its CPU is in CPU per GiB, which covers "
            "fio's whole run). The fio engine sends UNSTABLE WRITEs, counts each when the server answers, and "
            "commits only on fsync, which these jobs never ask for.")


def local(host):
    return ("“vs local” divides by the same fio job run on the export directory itself, with O_DIRECT (direct=1, "
            "libaio): every read and write of the baseline goes to the block device under the export. The server "
            f"opens files without O_DIRECT and the export is {host.get('export_options', '?')}, so it reads from and "
            "writes into its page cache, and the files it serves were written through it just before. A ratio above 1 "
            "means the server's page cache beat the block device, not that NFS beats local storage.")


def section(r):
    items = [provider(r["host"])]
    if r.get("metadata"):
        items.append(metadata(r["metadata"]))
    items += [writes(), local(r["host"])]
    return ("<h2>Read the figures with this in mind</h2><ul class=notes>"
            + "".join(f"<li>{prose(i)}</li>" for i in items) + "</ul>")
