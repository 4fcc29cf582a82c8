"""Metadata rates through a mount: create (open O_CREAT + close), stat and
unlink of N files in a fresh directory, each phase timed on its own, with the
client and server CPU they cost."""
import os
import time

import harness


def measure(mnt, files, fuse_pid, server_pid):
    d = os.path.join(mnt, f"meta-{os.getpid()}-{time.monotonic_ns()}")
    os.mkdir(d)
    names = [os.path.join(d, f"f{i:06d}") for i in range(files)]
    out = {"files": files}
    phases = (("create", lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))),
              ("stat", os.stat), ("unlink", os.unlink))
    for name, op in phases:
        c0, s0 = harness.cpu_seconds(fuse_pid), harness.cpu_seconds(server_pid)
        t0 = time.perf_counter()
        for p in names:
            op(p)
        secs = time.perf_counter() - t0
        out[name] = {"per_s": files / secs, "client_cpu_us": (harness.cpu_seconds(fuse_pid) - c0) / files * 1e6,
                     "server_cpu_us": (harness.cpu_seconds(server_pid) - s0) / files * 1e6}
    os.rmdir(d)
    return out
