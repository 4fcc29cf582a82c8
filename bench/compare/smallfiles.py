"""Small files through a mount, two ways:

- per operation: create+write+close, stat, open+read+close, rename and unlink
  of 100-byte files, each N times: microseconds per operation, the NFS calls
  the server counted for it, and where the time went (outside NFS calls: the
  kernel's VFS and FUSE layers and the daemon; on the wire and in the
  transports; in the server), as far as the two sides' counters tell;
- real programs: tar -x of a tree, rm -rf of it, rsync -a of another, git
  clone of a repository and git status twice in the clone, and a SQLite loop
  of one-row transactions, each timed on every target (a mount, or the export
  directory itself), targets interleaved, medians.

run.py measures nfsrdma-fuse over rdma and tcp on this host; guest.py the
kernel's NFS client and nfsrdma-fuse on each server in the soft-RoCE guest.
"""
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import time
import urllib.request

OPS = ("create+write+close", "stat", "open+read+close", "rename", "unlink")
WORKLOADS = ("tar -x", "rm -rf", "rsync -a", "git clone", "git status x2", "sqlite")


# ---- counters: each returns (calls, seconds) summed over NFS procedures ----

def metrics_calls(address, side):
    """(calls, seconds) of NFS calls at an nfsrdma metrics endpoint; side is
    "client" (nfsrdma-fuse) or "server" (nfsrdma-server, NFS program only)."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    calls = secs = 0.0
    for m in re.finditer(r'^nfsrdma_%s_call_seconds_(sum|count)\{([^}]*)\} (\S+)' % side, text, re.M):
        if side == "server" and 'program="NFS"' not in m.group(2):
            continue
        if m.group(1) == "sum":
            secs += float(m.group(3))
        else:
            calls += float(m.group(3))
    return calls, secs


def fuse_requests(address):
    """The requests the kernel's FUSE layer made of nfsrdma-fuse (its metrics
    endpoint), every operation together."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r'^nfsrdma_fuse_requests_total\{[^}]*\} (\S+)', text, re.M))


def nfsd_calls():
    """(calls, None): the kernel nfsd's NFSv3 calls but NULL (/proc/net/rpc/nfsd);
    it keeps no time per call."""
    for line in open("/proc/net/rpc/nfsd"):
        if line.startswith("proc3 "):
            counts = [int(x) for x in line.split()[2:]]
            return float(sum(counts[1:])), None
    raise RuntimeError("no proc3 line in /proc/net/rpc/nfsd")


def kernel_client_calls(mnt):
    """(calls, seconds) the kernel's NFS client counts for the mount on `mnt`
    (/proc/self/mountstats: per operation, the calls and their total execute
    time in milliseconds, queueing and retransmissions included)."""
    calls = secs = 0.0
    mine = False
    for line in open("/proc/self/mountstats"):
        if line.startswith("device "):
            mine = f" mounted on {mnt} " in line
        elif mine and re.match(r"\s+[A-Z_]+: \d", line) and not line.strip().startswith("NULL"):
            f = line.split()[1:]
            calls += int(f[0])
            secs += int(f[7]) / 1000 if len(f) >= 8 else 0
    return calls, secs


# ---- per operation ----

def per_op(mnt, n, server, client=None, requests=None):
    """Runs each of OPS n times in a fresh directory under mnt. `server` and
    `client` are counters (above, bound to their endpoint): the server's gives
    the calls per operation, and with both the time splits into outside calls,
    wire and server; `requests` counts FUSE requests (nfsrdma-fuse's
    fuse_requests). Returns {op: {"us", "calls", "fuse_requests",
    "outside_us", "wire_us", "server_us"}}, a figure left None where a side
    keeps none."""
    d = os.path.join(mnt, f"ops-{os.getpid()}-{time.monotonic_ns()}")
    os.mkdir(d)
    data = b"x" * 100

    def create(i):
        fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)

    def read(i):
        fd = os.open(f"{d}/f{i}", os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)

    fns = {"create+write+close": create, "stat": lambda i: os.stat(f"{d}/f{i}"), "open+read+close": read,
           "rename": lambda i: os.rename(f"{d}/f{i}", f"{d}/g{i}"), "unlink": lambda i: os.unlink(f"{d}/g{i}")}
    out = {}
    for name in OPS:
        s0, c0, r0 = server(), client() if client else (0, None), requests() if requests else None
        t0 = time.perf_counter()
        for i in range(n):
            fns[name](i)
        wall = (time.perf_counter() - t0) / n
        s1, c1, r1 = server(), client() if client else (0, None), requests() if requests else None
        srv = (s1[1] - s0[1]) / n if s0[1] is not None else None
        cli = (c1[1] - c0[1]) / n if c0[1] is not None else None
        us = lambda x: x * 1e6 if x is not None else None
        out[name] = {"us": wall * 1e6, "calls": (s1[0] - s0[0]) / n,
                     "fuse_requests": (r1 - r0) / n if requests else None,
                     "outside_us": us(wall - cli) if cli is not None else None,
                     "wire_us": us(cli - srv) if cli is not None and srv is not None else None,
                     "server_us": us(srv)}
    os.rmdir(d)
    return out


# ---- real programs ----

def run(*cmd, cwd=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Inputs:
    """What the programs work on, made once in `work` from spec: "tree" (the
    directory tar packs), "rsync_tree" (the one rsync copies), each cut to its
    first "files" files when set; "repo" (a git repository to clone, or None:
    one made of the tar tree); "txns" (SQLite transactions)."""

    def __init__(self, spec, work):
        self.spec = spec
        self.tarball = os.path.join(work, "tree.tar")
        limit = spec.get("files")
        parent, base = os.path.split(spec["tree"].rstrip("/"))
        names = self.listing(spec["tree"], limit, prefix=base)
        with open(os.path.join(work, "tar.list"), "w") as f:
            f.write("\n".join(names) + "\n")
        run("tar", "-cf", self.tarball, "-C", parent, "--no-recursion", "-T", os.path.join(work, "tar.list"))
        self.tar_files = sum(1 for n in names if os.path.isfile(os.path.join(parent, n)))
        self.rsync_list = os.path.join(work, "rsync.list")
        rnames = self.listing(spec["rsync_tree"], limit)
        with open(self.rsync_list, "w") as f:
            f.write("\n".join(rnames) + "\n")
        self.rsync_files = sum(1 for n in rnames if os.path.isfile(os.path.join(spec["rsync_tree"], n)))
        self.repo = spec.get("repo")
        if not self.repo:
            self.repo = os.path.join(work, "repo")
            os.mkdir(self.repo)
            run("tar", "-xf", self.tarball, "-C", self.repo)
            env = ("-c", "user.name=bench", "-c", "user.email=bench@localhost")
            run("git", "init", "-q", self.repo)
            run("git", *env, "-C", self.repo, "add", "-A")
            run("git", *env, "-C", self.repo, "commit", "-q", "-m", "tree")
        self.repo_files = int(subprocess.run(["git", "-C", self.repo, "ls-files"], capture_output=True,
                                             text=True, check=True).stdout.count("\n"))

    @staticmethod
    def listing(top, limit, prefix=""):
        """Paths under top (directories before what they hold), relative, with
        `prefix` in front, cut after `limit` files."""
        names, files = [prefix] if prefix else [], 0
        for root, dirs, fs in os.walk(top):
            dirs.sort()
            rel = os.path.relpath(root, top)
            for name in sorted(dirs) + sorted(fs):
                if limit and files >= limit:
                    return names
                names.append(os.path.normpath(os.path.join(prefix, rel, name)))
                files += name in fs
        return names

    def describe(self):
        return {"tar_files": self.tar_files, "tree": self.spec["tree"], "rsync_files": self.rsync_files,
                "rsync_tree": self.spec["rsync_tree"], "repo_files": self.repo_files, "txns": self.spec["txns"]}

    def steps(self):
        """(name, setup, timed step), each given the directory to work in."""
        tree = os.path.basename(self.spec["tree"].rstrip("/"))
        clone = lambda d: run("git", "clone", "-q", "--no-hardlinks", self.repo, d + "/repo")
        status = lambda d: run("git", "status", "--porcelain", cwd=d + "/repo")
        untar = lambda d: run("tar", "-xf", self.tarball, "-C", d)
        return [
            ("tar -x", None, untar),
            ("rm -rf", untar, lambda d: run("rm", "-rf", os.path.join(d, tree))),
            ("rsync -a", None, lambda d: run("rsync", "-a", "--files-from", self.rsync_list,
                                             self.spec["rsync_tree"] + "/", d + "/rs")),
            ("git clone", None, clone),
            ("git status x2", clone, lambda d: (status(d), status(d))),
            ("sqlite", None, lambda d: self.sqlite(d + "/db.sqlite")),
        ]

    def sqlite(self, path):
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("create table t (k integer primary key, v text)")
            for i in range(self.spec["txns"]):
                db.execute("begin")
                db.execute("insert into t (v) values (?)", (f"row {i}",))
                db.execute("commit")
        finally:
            db.close()  # a failed loop leaves no file open, so its directory can go


def workloads(inputs, targets, repeats, log=None):
    """Times every program on every target ({name: directory}), `repeats`
    rounds with the targets interleaved; {program: {target: median seconds}}."""
    out = {}
    for name, setup, step in inputs.steps():
        times, failed = {t: [] for t in targets}, {}
        for _ in range(repeats):
            for t, base in targets.items():
                if t in failed:
                    continue
                d = os.path.join(base, f"w-{os.getpid()}")
                try:
                    os.mkdir(d)
                    if setup:
                        setup(d)
                    t0 = time.perf_counter()
                    step(d)
                    times[t].append(time.perf_counter() - t0)
                except (OSError, subprocess.SubprocessError, sqlite3.Error) as e:
                    failed[t] = str(e)[:200]  # a failing program is a finding, not the end of the run
                shutil.rmtree(d, ignore_errors=True)
        out[name] = {t: {"error": failed[t]} if t in failed else statistics.median(v) for t, v in times.items()}
        if log:
            log(f"{name}: " + ", ".join(f"{t} {s:.2f} s" if not isinstance(s, dict) else f"{t} failed: {s['error']}"
                                        for t, s in out[name].items()))
    return out
