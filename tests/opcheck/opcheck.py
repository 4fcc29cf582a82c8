#!/usr/bin/env python3
"""A random-operation checker, in the manner of fsx: a seeded sequence of
writes, truncates (by descriptor and by name), reads, mmap reads and writes,
fsyncs and reopens on a file under test and on a reference copy on a local
filesystem, with the two compared after every step. On the first difference
it prints the seed, the step and the operation, and the last operations
before it, and exits 1; it exits 0 when every step agreed.

  opcheck.py --dir MOUNTED_DIR --reference LOCAL_DIR --seed N [--ops N] [--max-size BYTES]
"""
import argparse
import mmap
import os
import random
import sys

PAGE = mmap.PAGESIZE


class Mismatch(Exception):
    pass


class Pair:
    """The file under test and its reference, each open read-write."""

    def __init__(self, test_path, ref_path):
        self.paths = (test_path, ref_path)
        for p in self.paths:
            if os.path.exists(p):
                os.unlink(p)
        self.fds = [os.open(p, os.O_CREAT | os.O_RDWR, 0o644) for p in self.paths]

    def each(self, fn):
        return [fn(fd) for fd in self.fds]

    def size(self):
        return os.fstat(self.fds[1]).st_size

    def reopen(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = [os.open(p, os.O_RDWR) for p in self.paths]

    def close(self):
        for fd in self.fds:
            os.close(fd)


def pread_all(fd, length):
    out, off = bytearray(), 0
    while off < length:
        chunk = os.pread(fd, min(1 << 20, length - off), off)
        if not chunk:
            break
        out += chunk
        off += len(chunk)
    return bytes(out)


def compare(pair, what):
    """Sizes by fstat and by name, then every byte through the open descriptors."""
    sizes = pair.each(lambda fd: os.fstat(fd).st_size)
    names = [os.stat(p).st_size for p in pair.paths]
    if sizes[0] != sizes[1] or names[0] != names[1]:
        raise Mismatch(f"size after {what}: fstat {sizes[0]} (reference {sizes[1]}), "
                       f"stat {names[0]} (reference {names[1]})")
    got, want = (pread_all(fd, sizes[1]) for fd in pair.fds)
    if got != want:
        at = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
        raise Mismatch(f"contents after {what}: first difference at byte {at} "
                       f"(got {got[at:at + 8].hex()}, want {want[at:at + 8].hex()}); lengths {len(got)} and {len(want)}")


def step(rng, pair, max_size):
    """One random operation on both files; returns its description."""
    size = pair.size()
    kind = rng.choices(("write", "truncate", "truncate_name", "read", "mapread", "mapwrite", "fsync", "reopen"),
                       weights=(30, 8, 4, 15, 10, 10, 5, 5))[0]
    if kind == "write":
        off = rng.randrange(0, max_size)
        n = rng.randrange(1, min(65536, max_size - off) + 1)
        data = rng.randbytes(n)
        pair.each(lambda fd: os.pwrite(fd, data, off))
        return f"write {n} bytes at {off}"
    if kind in ("truncate", "truncate_name"):
        new = rng.randrange(0, max_size)
        if kind == "truncate":
            pair.each(lambda fd: os.ftruncate(fd, new))
        else:
            for p in pair.paths:
                os.truncate(p, new)
        return f"{'ftruncate' if kind == 'truncate' else 'truncate by name'} to {new} (from {size})"
    if kind == "read":
        if size == 0:
            return "read of an empty file"
        off = rng.randrange(0, size)
        n = rng.randrange(1, size - off + 1)
        got, want = pair.each(lambda fd: os.pread(fd, n, off))
        if got != want:
            raise Mismatch(f"read {n} at {off}: {len(got)} bytes differ from the reference's {len(want)}")
        return f"read {n} bytes at {off}"
    if kind == "mapread":
        if size == 0:
            return "mmap read of an empty file"
        off = rng.randrange(0, size) // PAGE * PAGE
        n = rng.randrange(1, size - off + 1)
        got, want = pair.each(lambda fd: mapped(fd, off, n, lambda m: m[:n]))
        if got != want:
            raise Mismatch(f"mmap read {n} at {off} differs")
        return f"mmap read {n} bytes at {off}"
    if kind == "mapwrite":
        off = rng.randrange(0, max_size)
        n = rng.randrange(1, min(65536, max_size - off) + 1)
        data = rng.randbytes(n)
        if off + n > size:  # a mapping does not extend a file: grow it first, as fsx does
            pair.each(lambda fd: os.ftruncate(fd, off + n))
        start = off // PAGE * PAGE

        def write(m):
            m[off - start:off - start + n] = data
            m.flush()

        pair.each(lambda fd: mapped(fd, start, off + n - start, write, writable=True))
        return f"mmap write {n} bytes at {off}" + (f" (file grown from {size})" if off + n > size else "")
    if kind == "fsync":
        pair.each(os.fsync)
        return "fsync"
    pair.reopen()
    return "close and reopen"


def mapped(fd, off, n, fn, writable=False):
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    m = mmap.mmap(fd, n, mmap.MAP_SHARED, prot, offset=off)
    try:
        return fn(m)
    finally:
        m.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="directory under test (on the mount)")
    ap.add_argument("--reference", required=True, help="directory on a local filesystem")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ops", type=int, default=500)
    ap.add_argument("--max-size", type=int, default=256 << 10)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    name = f"opcheck-{a.seed}"
    pair = Pair(os.path.join(a.dir, name), os.path.join(a.reference, name))
    history = []
    try:
        for i in range(1, a.ops + 1):
            what = step(rng, pair, a.max_size)
            history.append(f"{i}: {what}")
            compare(pair, what)
    except (Mismatch, OSError) as e:
        print(f"opcheck: seed {a.seed}, step {len(history) + (0 if isinstance(e, Mismatch) else 1)}: {e}")
        print("opcheck: the operations before it:\n  " + "\n  ".join(history[-12:]))
        return 1
    finally:
        pair.close()
    for p in pair.paths:
        os.unlink(p)
    print(f"opcheck: seed {a.seed}: {a.ops} operations, the file matched its reference after each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
