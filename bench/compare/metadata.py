"""Metadata rates through a mount: create (open O_CREAT + close), stat and
unlink of N files in a fresh directory, each phase timed on its own, with the
CPU each meter (name: a function returning CPU seconds so far) counts per file."""
import os
import time


def measure(mnt, files, meters):
    d = os.path.join(mnt, f"meta-{os.getpid()}-{time.monotonic_ns()}")
    os.mkdir(d)
    names = [os.path.join(d, f"f{i:06d}") for i in range(files)]
    out = {"files": files}
    phases = (("create", lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))),
              ("stat", os.stat), ("unlink", os.unlink))
    for name, op in phases:
        c0 = {k: m() for k, m in meters.items()}
        t0 = time.perf_counter()
        for p in names:
            op(p)
        secs = time.perf_counter() - t0
        out[name] = {"per_s": files / secs}
        out[name].update({f"{k}_cpu_us": (m() - c0[k]) / files * 1e6 for k, m in meters.items()})
    os.rmdir(d)
    return out
