#!/usr/bin/env python3
"""small_ops.py: where a small-file operation's time goes through nfsrdma-fuse.

Starts nfsrdma-server (loopback, a temporary export) and mounts it with
nfsrdma-fuse, both with metrics (bench/compare/harness.py's Host), then runs each operation N times on files of
100 bytes and prints, per operation: microseconds, NFS calls, and the time
split into the kernel's FUSE layer plus the daemon (the wall time less the
client's call time), the wire and transports (the client's call time less the
server's), and the server (its time from a call's arrival to its reply).

  bench/small_ops.py --build build --proto rdma     # RPC-RDMA (tcp provider where no RDMA device)
  bench/small_ops.py --build build --proto tcp --export-option async -n 2000
"""
import argparse
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare"))
import harness  # noqa: E402  (bench/compare: the server and mounts every benchmark starts)


def call_seconds(address, side):
    """(calls, seconds) of every NFS call counted at a metrics endpoint."""
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


def measure(mnt, cmet, smet, n):
    d = os.path.join(mnt, "small-ops")
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

    ops = [("create+write+close", create), ("stat", lambda i: os.stat(f"{d}/f{i}")), ("open+read+close", read),
           ("rename", lambda i: os.rename(f"{d}/f{i}", f"{d}/g{i}")), ("unlink", lambda i: os.unlink(f"{d}/g{i}"))]
    print(f"{'operation':<20}{'µs':>8}{'calls':>7}{'FUSE+daemon µs':>16}{'wire µs':>9}{'server µs':>11}")
    for name, fn in ops:
        c0, s0 = call_seconds(cmet, "client")
        v0 = call_seconds(smet, "server")[1]
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        wall = (time.perf_counter() - t0) / n
        c1, s1 = call_seconds(cmet, "client")
        v1 = call_seconds(smet, "server")[1]
        client, server = (s1 - s0) / n, (v1 - v0) / n
        print(f"{name:<20}{wall * 1e6:8.0f}{(c1 - c0) / n:7.1f}{(wall - client) * 1e6:16.0f}"
              f"{(client - server) * 1e6:9.0f}{server * 1e6:11.0f}")
    os.rmdir(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the meson build directory (default: build)")
    ap.add_argument("--proto", choices=("rdma", "tcp"), default="rdma", help="the mount's transport")
    ap.add_argument("--provider", default="tcp", help="libfabric provider for rdma (default: tcp)")
    ap.add_argument("--export-option", choices=("sync", "async"), default="sync", help="the export's sync option")
    ap.add_argument("-n", type=int, default=1000, help="operations of each kind (default 1000)")
    a = ap.parse_args()
    for f in ("server/nfsrdma-server", "client/fuse/nfsrdma-fuse"):
        if not os.access(os.path.join(a.build, f), os.X_OK):
            sys.exit(f"small_ops: {a.build}/{f} is not built (ninja -C {a.build})")
    h = harness.Host(a.build, a.provider)
    try:
        smet, cmet = f"127.0.0.1:{harness.free_port()}", f"127.0.0.1:{harness.free_port()}"
        h.start_server(export_options=f"rw,no_root_squash,{a.export_option}", extra=["--metrics", smet])
        mnt, _ = h.mount(a.proto, f"metrics={cmet}")
        print(f"nfsrdma-fuse over {a.proto}{' (' + a.provider + ')' if a.proto == 'rdma' else ''}, "
              f"{a.export_option} export, {a.n} of each, 100-byte files")
        measure(mnt, cmet, smet, a.n)
    except RuntimeError as e:
        sys.exit(f"small_ops: {e}")
    finally:
        h.stop()


if __name__ == "__main__":
    main()
