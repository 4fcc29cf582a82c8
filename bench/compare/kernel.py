"""The host's side of the kernel comparison: boots the soft-RoCE guest
(tools/guest/run.sh) with guest.sh as its job, shows the guest's progress as it
comes, and returns what guest.py measured."""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import matrix

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def available():
    """(True, "") where the guest can run here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "needs root (QEMU's 9p export of /)"
    if not shutil.which("qemu-system-x86_64"):
        return False, "QEMU is not installed (make deps installs qemu-system-x86)"
    return True, ""


def budget(p):
    """Seconds the guest may take: every fio run with its start-up under
    emulation, the metadata jobs, boot and set-up."""
    runs = len(p["jobs"]) * 12 * p["repeats"]
    sf = p.get("smallfiles")
    # Small files through four mounts and on the export: about 30 ms a file
    # and 20 ms a transaction under emulation, 10 ms an operation.
    small = 5 * sf["repeats"] * (2 * (sf["files"] or 9000) * 0.03 + sf["txns"] * 0.02 + 60) + \
        4 * 5 * sf["ops"] * 0.01 if sf else 0
    return int(runs * (p["seconds"] + 8) + 8 * 3 * p["files"] * 0.01 + small + 600)


def follow(path, stop):
    """Prints the lines of a file as they are written, until stop is set."""
    pos = 0
    while True:
        done = stop.is_set()
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                f.seek(pos)
                chunk = f.read()
                pos = f.tell()
            if chunk:
                sys.stderr.write(chunk)
                sys.stderr.flush()
        if done:
            return
        time.sleep(1)


def run(build, preset, out, seconds=None, repeats=None):
    """Runs guest.py's preset in one guest boot; returns its results (with the
    reason in "error" if the guest failed)."""
    p = dict(matrix.GUEST_PRESETS[preset])
    p.update({k: v for k, v in (("seconds", seconds), ("repeats", repeats)) if v})
    name = f"bench-{preset}"
    results = os.path.join(os.path.abspath(build), "guest", "runs", name)
    args = [os.path.join(ROOT, "tools", "guest", "run.sh"), "--name", name, "--timeout", str(budget(p)),
            os.path.join(HERE, "guest.sh"), "--preset", preset]
    args += [x for k, v in (("--seconds", seconds), ("--repeats", repeats)) if v for x in (k, str(v))]
    env = dict(os.environ, BUILD=os.path.abspath(build))
    stop = threading.Event()
    # run.sh clears the results directory first; the old log must not be replayed.
    shutil.rmtree(results, ignore_errors=True)
    t = threading.Thread(target=follow, args=(os.path.join(results, "output.log"), stop), daemon=True)
    t.start()
    print(f"booting the soft-RoCE guest for the kernel comparison ({preset}, at most {budget(p) // 60} min)",
          file=sys.stderr, flush=True)
    r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    stop.set()
    t.join()
    path = os.path.join(results, "kernel.json")
    if r.returncode != 0 or not os.path.exists(path):
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return {"preset": preset, "error": f"the guest run failed ({why}); its logs are in {results}"}
    k = json.load(open(path))
    os.makedirs(out, exist_ok=True)
    shutil.copy(path, os.path.join(out, "kernel.json"))
    k["logs"] = results
    return k
