"""Metadata rates through a mount: create (open O_CREAT + close), stat and
unlink of N files in a fresh directory, each phase timed on its own, with the
CPU each meter (name: a function returning CPU seconds so far) counts per file;
then uncontended network locks: fcntl lock and unlock of one byte, in turn,
as round trips (lock + unlock pairs) per second, or why the mount has none."""
import errno
import fcntl
import os
import time

LOCK_PAIRS = 2000


def lock_rate(path, meters):
    """Lock + unlock pairs per second on `path`, or {"error": why}."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        c0 = {k: m() for k, m in meters.items()}
        t0 = time.perf_counter()
        for _ in range(LOCK_PAIRS):
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        secs = time.perf_counter() - t0
        out = {"per_s": LOCK_PAIRS / secs, "pairs": LOCK_PAIRS}
        out.update({f"{k}_cpu_us": (m() - c0[k]) / LOCK_PAIRS * 1e6 for k, m in meters.items()})
        return out
    except OSError as e:
        why = "no network lock manager (ENOLCK)" if e.errno == errno.ENOLCK else os.strerror(e.errno)
        return {"error": why}
    finally:
        os.close(fd)
        os.unlink(path)


def measure(mnt, files, meters, no_locks=None):
    """`no_locks`: why the mount's locks are not network locks (then not timed)."""
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
    out["lock"] = {"error": no_locks} if no_locks else lock_rate(os.path.join(d, "lock"), meters)
    os.rmdir(d)
    return out


def lock_text(m):
    """The lock phase in one phrase, for logs and text reports."""
    l = m.get("lock")
    if not l:
        return "locks not measured"
    return f"lock+unlock {l['per_s']:.0f}/s" if "error" not in l else f"locks: {l['error']}"
