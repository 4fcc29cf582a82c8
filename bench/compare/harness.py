"""Processes the comparison harness starts and measures: nfsrdma-server,
fabric_bench, nfsrdma-fuse mounts, fio. All on loopback (or in network
namespaces this module creates), all stopped on exit."""
import json
import os
import resource
import shutil
import signal
import statistics
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port, host):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def wait_port(port, host="127.0.0.1", seconds=10.0, netns=None):
    end = time.time() + seconds
    while time.time() < end:
        cmd = ["bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]
        if netns:
            cmd = ["ip", "netns", "exec", netns] + cmd
        if subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {host}:{port} after {seconds:g} s")


def cpu_seconds(pid):
    """User + system CPU seconds of a process (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Host:
    """The processes of one run; stop() ends them all, in reverse order."""

    def __init__(self, build, provider, addr="127.0.0.1", keep=False, workdir=None):
        self.build = os.path.abspath(build)
        self.provider = provider
        self.addr = addr  # where the server listens; other hosts reach it there
        # The export is in here: its filesystem decides what the server can do inline.
        self.work = tempfile.mkdtemp(prefix="nfsrdma-bench-", dir=workdir or "/var/tmp")
        os.chmod(self.work, 0o755)
        self.procs = []   # (name, Popen)
        self.mounts = []
        self.client_metrics = {}  # transport: the mount's Prometheus endpoint
        self.netns = []
        self.keep = keep

    def spawn(self, name, args, **kw):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, **kw)
        self.procs.append((name, p))
        return p

    def start_server(self, export_options="rw,no_root_squash,async", extra=()):
        self.export = os.path.join(self.work, "export")
        os.makedirs(self.export, exist_ok=True)
        self.nfs_port, self.mount_port, self.rdma_port = free_port(), free_port(), free_port()
        self.metrics = f"127.0.0.1:{free_port()}"  # its Prometheus endpoint
        # Mounts find the server's lock manager through port 111: served here
        # when nothing else holds it (else the lock figures say ENOLCK).
        portmap = ["--portmap"] if port_free(111, self.addr) else []
        self.server = self.spawn("server", [
            f"{self.build}/server/nfsrdma-server", "--export", self.export_line(export_options),
            "--bind", self.addr, "--port", str(self.nfs_port), "--mount-port", str(self.mount_port),
            "--rdma-port", str(self.rdma_port), "--provider", self.provider, "--no-register", *portmap,
            "--state-dir", os.path.join(self.work, "state"), "--log-level", "warn",
            "--metrics", self.metrics, *extra])
        wait_port(self.nfs_port, host=self.addr)
        self.export_options = export_options
        return self.server

    def export_line(self, options):
        clients = ["127.0.0.1"] + ([f"{self.addr}/24"] if self.addr != "127.0.0.1" else [])
        return self.export + " " + " ".join(f"{c}({options})" for c in clients)

    def start_fabric_bench(self):
        self.fab_port = free_port()
        self.spawn("fabric_bench", [f"{self.build}/bench/fabric_bench", "--provider", self.provider,
                                    "--port", str(self.fab_port)])
        wait_port(self.fab_port)

    def port_for(self, transport):
        return self.rdma_port if transport == "rdma" else self.nfs_port

    def mount(self, transport, options=""):
        mnt = os.path.join(self.work, f"mnt-{transport}")
        os.makedirs(mnt, exist_ok=True)
        self.client_metrics[transport] = f"127.0.0.1:{free_port()}"
        opts = (f"proto={transport},port={self.port_for(transport)},mountport={self.mount_port},"
                f"provider={self.provider},metrics={self.client_metrics[transport]}" + ("," + options if options else ""))
        p = self.spawn(f"fuse-{transport}", [f"{self.build}/client/fuse/nfsrdma-fuse", "-f",
                                             f"{self.addr}:{self.export}", mnt, "-o", opts])
        for _ in range(400):
            if os.path.ismount(mnt):
                self.mounts.append(mnt)
                return mnt, p
            if p.poll() is not None:
                raise RuntimeError(f"nfsrdma-fuse exited: {open(os.path.join(self.work, f'fuse-{transport}.log')).read()}")
            time.sleep(0.025)
        raise RuntimeError("nfsrdma-fuse did not mount in 10 s")

    def stop_process(self, p):
        """Ends one process this host started (SIGTERM, then SIGKILL after 10 s)."""
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self.procs = [(n, q) for n, q in self.procs if q is not p]

    def stop(self):
        for mnt in reversed(self.mounts):
            subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for ns in self.netns:
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True)
            subprocess.run(["bash", "-c", f"ip netns pids {ns} | xargs -r kill -9; ip netns del {ns}"],
                           stderr=subprocess.DEVNULL)
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def run_measured(args, out_path, watch=(), env=None, timeout=300):
    """Runs a command to completion (killed after `timeout` s: a peer that
    hangs is a finding, not the end of the run); returns (wall seconds, the
    command's CPU seconds with its children, {pid: CPU seconds} of each
    watched process)."""
    before = {pid: cpu_seconds(pid) for pid in watch}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    with open(out_path, "w") as out:
        try:
            r = subprocess.run(args, stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{os.path.basename(args[0])} did not finish within {timeout} s; killed")
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(args[0])} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    wall = time.time() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, own, {pid: cpu_seconds(pid) - before[pid] for pid in watch}


def fio_summary(path, rw):
    """Bandwidth, IOPS, bytes and completion-latency percentiles of one fio job;
    in client/server mode, summed over the client hosts."""
    text = open(path).read()
    doc = json.loads(text[text.index("{"):] if text.startswith("{") else text[text.index("\n{") + 1:])
    if "client_stats" in doc:
        hosts = [c for c in doc["client_stats"] if c["jobname"] != "All clients"]
        side_of = lambda c: c["write"] if "write" in rw else c["read"]
        j = dict(hosts[0])
        total = {k: sum(side_of(c)[k] for c in hosts) for k in ("bw_bytes", "iops", "io_bytes")}
        worst = max(hosts, key=lambda c: side_of(c)["clat_ns"].get("percentile", {}).get("99.000000", 0))
        j["read" if "write" not in rw else "write"] = dict(side_of(worst), **total)
    else:
        j = doc["jobs"][0]
    side = j["write"] if "write" in rw else j["read"]
    if side["io_bytes"] == 0:
        raise RuntimeError(f"fio moved no data (job error {j.get('error', '?')})")
    pct = side["clat_ns"].get("percentile", {})
    us = lambda key: pct.get(key, 0) / 1000.0
    return {"bw_MiBps": side["bw_bytes"] / 2**20, "iops": side["iops"], "io_bytes": side["io_bytes"],
            "lat_us": {"p50": us("50.000000"), "p99": us("99.000000"), "p99.9": us("99.900000")}}


def summarise(runs, medians=()):
    """The repeats of one cell as one: bandwidth and IOPS as median, min and
    max; the latency percentiles of the median run; the median of each key in
    `medians`."""
    runs = sorted(runs, key=lambda r: r["iops"])
    spread = lambda k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs),
                        "max": max(r[k] for r in runs)}
    out = {"bw_MiBps": spread("bw_MiBps"), "iops": spread("iops"), "lat_us": runs[len(runs) // 2]["lat_us"],
           "repeats": len(runs)}
    out.update({k: statistics.median(r[k] for r in runs) for k in medians})
    return out
