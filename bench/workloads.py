#!/usr/bin/env python3
"""workloads.py: real programs on small files, on the export directory itself
and through nfsrdma-fuse over RPC-RDMA and over TCP, with the ratio of each to
the export directory.

Starts nfsrdma-server (loopback, a temporary export) and, in turn, mounts it
over each transport. Each workload runs --repeats times per target, targets
interleaved, and the median is printed:

  tar -x      a tarball of /usr/include (or --tree DIR), extracted
  rm -rf      that tree removed
  rsync -a    /usr/share/doc (or --rsync-tree DIR) copied in
  git clone   a local repository (--repo, default: this source tree), then
  git status  twice in the clone
  sqlite      1,000 one-row transactions (the mount with nolock: the
              server runs no portmapper here)

  bench/workloads.py --build build --repeats 3
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare"))
import harness  # noqa: E402  (bench/compare: the server and mounts every benchmark starts)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(*cmd, cwd=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sqlite_loop(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("create table t (k integer primary key, v text)")
    for i in range(1000):
        db.execute("begin")
        db.execute("insert into t (v) values (?)", (f"row {i}",))
        db.execute("commit")
    db.close()


def workloads(a, tarball):
    """(name, setup, timed step), each given the directory to work in."""
    tree = os.path.basename(a.tree.rstrip("/"))
    clone = lambda d: run("git", "clone", "-q", "--no-hardlinks", a.repo, d + "/repo")
    status = lambda d: run("git", "status", cwd=d + "/repo")
    return [
        ("tar -x", None, lambda d: run("tar", "-xf", tarball, "-C", d)),
        ("rm -rf", lambda d: run("tar", "-xf", tarball, "-C", d), lambda d: run("rm", "-rf", os.path.join(d, tree))),
        ("rsync -a", None, lambda d: run("rsync", "-a", a.rsync_tree + "/", d + "/rs")),
        ("git clone", None, clone),
        ("git status x2", clone, lambda d: (status(d), status(d))),
        ("sqlite 1,000 txns", None, lambda d: sqlite_loop(d + "/db.sqlite")),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the meson build directory (default: build)")
    ap.add_argument("--provider", default="tcp", help="libfabric provider for rdma (default: tcp)")
    ap.add_argument("--tree", default="/usr/include", help="the tree tar -x extracts (default: /usr/include)")
    ap.add_argument("--rsync-tree", default="/usr/share/doc", help="the tree rsync -a copies (default: /usr/share/doc)")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository git clones (default: this source tree)")
    ap.add_argument("--export-option", choices=("sync", "async"), default="sync", help="the export's sync option")
    ap.add_argument("--repeats", type=int, default=3, help="runs per workload and target (default 3)")
    a = ap.parse_args()
    for f in ("server/nfsrdma-server", "client/fuse/nfsrdma-fuse"):
        if not os.access(os.path.join(a.build, f), os.X_OK):
            sys.exit(f"workloads: {a.build}/{f} is not built (ninja -C {a.build})")
    for t in ("tar", "rsync", "git"):
        if not shutil.which(t):
            sys.exit(f"workloads: {t} is not installed")
    h = harness.Host(a.build, a.provider)
    try:
        tarball = os.path.join(h.work, "tree.tar")
        run("tar", "-cf", tarball, "-C", os.path.dirname(a.tree.rstrip("/")), os.path.basename(a.tree.rstrip("/")))
        h.start_server(export_options=f"rw,no_root_squash,{a.export_option}")
        targets = {"export dir": h.export}
        for proto in ("rdma", "tcp"):
            targets[f"fuse {proto}"] = h.mount(proto, "nolock")[0]
        print(f"{a.tree} ({sum(len(f) for _, _, f in os.walk(a.tree))} files), {a.export_option} export, "
              f"medians of {a.repeats}, seconds (ratio to the export dir)")
        print(f"{'workload':<20}" + "".join(f"{t:>22}" for t in targets))
        for name, setup, step in workloads(a, tarball):
            times = {t: [] for t in targets}
            for _ in range(a.repeats):
                for t, base in targets.items():
                    d = os.path.join(base, "w")
                    os.mkdir(d)
                    if setup:
                        setup(d)
                    times[t].append(timed(lambda: step(d)))
                    shutil.rmtree(d)
            local = statistics.median(times["export dir"])
            cells = []
            for t in targets:
                m = statistics.median(times[t])
                cells.append(f"{m:8.2f}" + (f" ({m / local:5.1f}x)" if t != "export dir" else " " * 9))
            print(f"{name:<20}" + "".join(f"{c:>22}" for c in cells), flush=True)
    except RuntimeError as e:
        sys.exit(f"workloads: {e}")
    finally:
        h.stop()


if __name__ == "__main__":
    main()
