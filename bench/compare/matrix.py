"""The comparison matrix: presets, the fio command for each path, and the
baselines every cell is divided by."""
import itertools
import os
import subprocess

WORKLOADS = ("read", "write", "randread", "randwrite")
LABEL = {"read": "seq read", "write": "seq write", "randread": "rand read", "randwrite": "rand write"}

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Small files (smallfiles.py): the trees and repository the real programs work
# on, how many of each small-file operation, rounds of the programs.
SMALLFILES = {"tree": "/usr/include", "rsync_tree": "/usr/share/doc", "files": None,
              "repo": ROOT if os.path.isdir(os.path.join(ROOT, ".git")) else None, "txns": 1000, "ops": 1000,
              "repeats": 3}
SMALLFILES_SMOKE = dict(SMALLFILES, files=100, repo=None, txns=20, ops=50, repeats=1)

PRESETS = {
    # make demo: the shape of every comparison in a couple of minutes.
    "quick": {"transports": ("rdma", "tcp"), "paths": ("engine", "fuse"), "cells": [
        ("read", "1M", 16), ("write", "1M", 16), ("randread", "4k", 16), ("randwrite", "4k", 16)],
        "seconds": 3, "repeats": 1, "size": "1G", "peers": False},
    # make bench: the whole matrix, three repeats each.
    # Plus small random I/O at QD32, where per-call CPU shows most.
    "full": {"transports": ("rdma", "tcp"), "paths": ("engine", "fuse"), "cells": list(itertools.product(
        WORKLOADS, ("4k", "64k", "1M"), (1, 16))) + [("randread", "4k", 32), ("randwrite", "4k", 32)],
        "seconds": 3, "repeats": 3, "size": "2G", "peers": True,
        "transfer_jobs": [(rw, bs) for rw in ("read", "write") for bs in ("1M", "4M")], "smallfiles": SMALLFILES},
    # the fio engine alone against its baselines (raw RMA for the 64 KiB and
    # 1 MiB jobs, the NULL-call rate for 4 KiB): the purest measure of the transport.
    "engine": {"transports": ("rdma", "tcp"), "paths": ("engine",), "cells": [
        (rw, bs, 16) for bs in ("64k", "1M") for rw in ("write", "read")] + [("randread", "4k", 32)],
        "seconds": 5, "repeats": 1, "size": "512M", "peers": False},
    # the servers side by side under the same clients, where the host has
    # them: nfsrdma-fuse over TCP on ours and on nfs-ganesha, fio's libnfs
    # engine (tools/fio-libnfs.sh builds it) on both, the kernel client on
    # ours where the kernel has one; beside the export used locally.
    "peers": {"transports": ("tcp",), "paths": ("fuse",), "cells": [("write", "1M", 16), ("read", "1M", 16)],
              "seconds": 3, "repeats": 3, "size": "1G", "peers": True, "kernel": False, "files": 1000},
    # small files alone, on a sync export (as a server exports by default):
    # 10,000 files created, stat'ed and unlinked, each operation's calls and
    # time, and the real programs.
    "smallfiles": {"transports": ("rdma", "tcp"), "paths": ("fuse",), "cells": [], "seconds": 3, "repeats": 1,
                   "size": "1G", "peers": False, "export_options": "rw,no_root_squash,sync", "smallfiles": SMALLFILES},
    # transfer sizes alone: what a 4 MiB server does to sequential engine jobs.
    "transfer": {"transports": ("rdma", "tcp"), "paths": (), "cells": [], "seconds": 3, "repeats": 3, "size": "1G",
                 "peers": False, "transfer_jobs": [(rw, bs) for rw in ("read", "write") for bs in ("1M", "4M")]},
    # the harness's own test: one cell per path, shortest runs.
    "smoke": {"transports": ("rdma", "tcp"), "paths": ("engine", "fuse"), "cells": [("read", "1M", 4),
              ("randwrite", "4k", 4)], "seconds": 1, "repeats": 1, "size": "64M", "peers": False, "files": 500,
              "transfer_jobs": [("write", "4M")], "smallfiles": SMALLFILES_SMOKE},
}

# The kernel comparison, run inside the soft-RoCE guest (guest.py): every job
# through the kernel's client, nfsrdma-fuse and the fio engine, over RDMA and
# TCP, against the kernel's nfsd and nfsrdma-server.
KERNEL_JOBS = [(rw, bs, d) for rw in ("read", "write") for bs in ("1M", "64k") for d in (1, 16)] + [
    (rw, "4k", d) for rw in ("randread", "randwrite") for d in (1, 32)]
GUEST_PRESETS = {
    # make bench-kernel: the whole set, three repeats each.
    "kernel": {"jobs": KERNEL_JOBS, "seconds": 3, "repeats": 3, "size_MiB": 256, "files": 10000,
               "smallfiles": dict(SMALLFILES, files=2000, ops=500)},
    # inside make bench, where QEMU runs: the deep-queue jobs once.
    "kernel-quick": {"jobs": [("read", "1M", 16), ("write", "1M", 16), ("randread", "4k", 32),
                              ("randwrite", "4k", 32)], "seconds": 2, "repeats": 1, "size_MiB": 128, "files": 1000,
                     "smallfiles": dict(SMALLFILES, files=500, repo=None, txns=100, ops=200, repeats=1)},
    # small files alone: 10,000 files created, stat'ed and unlinked through
    # every mount, and the programs through the kernel's client and
    # nfsrdma-fuse on nfsrdma-server, three rounds.
    "kernel-smallfiles": {"jobs": [], "seconds": 1, "repeats": 1, "size_MiB": 16, "files": 10000,
                          "smallfiles": dict(SMALLFILES, files=2000, ops=500)},
    # the test of the guest mode itself.
    "kernel-smoke": {"jobs": [("read", "1M", 16), ("randwrite", "4k", 32)], "seconds": 1, "repeats": 1,
                     "size_MiB": 32, "files": 100, "smallfiles": dict(SMALLFILES_SMOKE, files=30, txns=10, ops=20)},
}
for _p in GUEST_PRESETS.values():
    _p["size"] = f"{_p['size_MiB']}M"

SIZE_BYTES = {"4k": 4096, "64k": 65536, "1M": 1 << 20}


def fio_common(name, rw, bs, depth, seconds, size):
    return [f"--name={name}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={depth}", f"--size={size}",
            "--time_based", f"--runtime={seconds}", "--percentile_list=50:99:99.9", "--output-format=json",
            "--randrepeat=0", "--norandommap"]


def engine_args(h, engine, transport, fname):
    return ["fio", f"--ioengine=external:{engine}", f"--nfs_export={h.addr}:{h.export}",
            f"--nfs_transport={transport}", f"--nfs_port={h.port_for(transport)}",
            f"--nfs_mount_port={h.mount_port}", f"--nfs_provider={h.provider}", f"--filename={fname}"]


def lay_out(fio, size, depth=16, prefix=()):
    """Writes the file a job reads: the fio command `fio` (engine and file
    arguments) writing `size` sequentially in 1 MiB blocks, `depth` at once;
    `prefix` runs it elsewhere (ip netns exec NS)."""
    subprocess.run([*prefix, *fio, "--name=layout", "--rw=write", "--bs=1M", f"--iodepth={depth}", f"--size={size}"],
                   stdout=subprocess.DEVNULL, check=True)


def file_args(path):
    """A path through the kernel (a mount, or the export itself): O_DIRECT with
    libaio, so iodepth means calls in flight and the page cache stays out."""
    return ["fio", "--ioengine=libaio", "--direct=1", f"--filename={path}"]


def transport_baseline(raw, null_rate, transport, rw, bs):
    """The limit the transport puts on a cell: raw RMA bandwidth for the size
    (READ data moves by RDMA Write, WRITE data by RDMA Read), or the NULL-call
    rate for small blocks. (value, unit, label) or None."""
    if bs == "4k":
        rate = null_rate.get(transport)
        return (rate, "IOPS", "NULL calls") if rate else None
    carrier = "write" if "read" in rw else "read"
    v = raw.get((carrier, bs))
    return (v, "MiB/s", f"raw RMA {carrier}") if v else None


def job_file(path, args):
    """The same job as a fio job file, for fio's client/server mode (remote
    hosts get job files, not command lines)."""
    lines = ["[job]"]
    for a in args[1:]:
        k, _, v = a[2:].partition("=")
        if k not in ("name", "output-format"):
            lines.append(f"{k}={v}" if v else k)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
