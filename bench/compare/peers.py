"""Peers measured in the same run where the host has them: nfs-ganesha
(Debian's, VFS FSAL) mounted by nfsrdma-fuse over TCP, fio's own libnfs
engine (`nfs`, built from Debian's fio source by tools/fio-libnfs.sh) against
both servers, and the kernel NFS client over TCP and RDMA. What the host lacks
is reported as unavailable, with the reason, never as a number."""
import os
import shutil
import subprocess
import time

import harness
import matrix

HERE = os.path.dirname(os.path.abspath(__file__))
FIO_LIBNFS = os.path.join(HERE, "..", "..", ".deps", "fio-libnfs", "fio")
NS = f"nfsrdma-bench-{os.getpid()}"


def have_ganesha():
    return shutil.which("ganesha.nfsd") and shutil.which("rpcbind") and shutil.which("ip")


def kernel_nfs():
    """(available, why not)."""
    fs = open("/proc/filesystems").read().split()
    if "nfs" in fs:
        return True, ""
    probe = subprocess.run(["modprobe", "-n", "-q", "nfs"], capture_output=True) if shutil.which("modprobe") else None
    if probe is not None and probe.returncode == 0:
        return True, ""
    return False, (f"not on this host: this kernel ({os.uname().release}) has no NFS client (no nfs in "
                   "/proc/filesystems, no module); the soft-RoCE guest's kernel comparison measures it instead")


def plan(preset, p):
    cells = [c for c in p["cells"] if c[2] == 16] or p["cells"]
    out = []
    if have_ganesha():
        out += [("ganesha", "fuse", c) for c in cells]
        if os.path.exists(FIO_LIBNFS):
            out += [("ganesha", "libnfs", c) for c in cells]
    if os.path.exists(FIO_LIBNFS):
        out += [("nfsrdma-server", "libnfs", c) for c in cells]
    if kernel_nfs()[0]:
        out += [("nfsrdma-server", f"kernel-{t}", c) for t in ("tcp", "rdma") for c in cells]
    return out


def unavailable(wanted):
    if not wanted:
        return [{"name": "peers", "why": "not measured in this preset (make bench runs them)"}]
    out = []
    ok, why = kernel_nfs()
    if not ok:
        out.append({"name": "kernel NFS client (tcp and rdma)", "why": why})
    if not have_ganesha():
        out.append({"name": "nfs-ganesha", "why": "ganesha.nfsd, rpcbind or ip is not installed"})
    if not os.path.exists(FIO_LIBNFS):
        out.append({"name": "fio nfs engine (libnfs)", "why": "not built: tools/fio-libnfs.sh builds it"})
    return out


def start_ganesha(h):
    d = os.path.join(h.work, "ganesha")
    os.makedirs(d, exist_ok=True)
    h.netns.append(NS)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
    conf = os.path.join(h.work, "ganesha.conf")
    with open(conf, "w") as f:
        f.write("NFS_CORE_PARAM { NFS_Port = 2049; MNT_Port = 20048; Protocols = 3; Enable_NLM = false; "
                "Enable_RQUOTA = false; Enable_UDP = false; }\nNFSV4 { Graceless = true; }\n"
                f"EXPORT {{ Export_Id = 1; Path = {d}; Pseudo = {d}; Access_Type = RW; Squash = No_Root_Squash; "
                "Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }\n")
    h.spawn("rpcbind", ["ip", "netns", "exec", NS, "rpcbind", "-w", "-f"])
    time.sleep(0.5)
    g = h.spawn("ganesha", ["ip", "netns", "exec", NS, "ganesha.nfsd", "-F", "-L",
                            os.path.join(h.work, "ganesha.log"), "-f", conf, "-p", os.path.join(h.work, "g.pid")])
    harness.wait_port(2049, netns=NS, seconds=20)
    return d, g


def run(h, peer_plan, result, prog, p, measure):
    if not peer_plan:
        return
    ganesha = start_ganesha(h) if any(s == "ganesha" for s, _, _ in peer_plan) else None
    laid_out = set()
    for server, path, (rw, bs, depth) in peer_plan:
        name = f"{server}-{path}-{rw}-{bs}-qd{depth}"
        common = matrix.fio_common(name, rw, bs, depth, p["seconds"], p["size"])
        out = os.path.join(h.work, name)
        if server == "ganesha":
            d, g = ganesha
            server_pid = g.pid
            if path == "fuse":
                mnt = os.path.join(h.work, "mnt-ganesha")
                os.makedirs(mnt, exist_ok=True)
                fio = " ".join(f"'{x}'" for x in matrix.file_args(os.path.join(mnt, "data")) + common)
                script = (f"{h.build}/client/fuse/nfsrdma-fuse -f 127.0.0.1:{d} {mnt} -o proto=tcp & F=$!; "
                          f"for i in $(seq 400); do mountpoint -q {mnt} && break; sleep 0.025; done; "
                          f"{fio}; s=$?; umount {mnt}; wait $F; exit $s")
            else:
                url = f"nfs://127.0.0.1{d}?version=3"
                fio = [FIO_LIBNFS, "--ioengine=nfs", f"--nfs_url={url}", "--filename=data-libnfs"]
                if ("ganesha", path) not in laid_out:  # fio's nfs engine reads only files that exist
                    laid_out.add(("ganesha", path))
                    matrix.lay_out(fio, p["size"], depth=1, prefix=["ip", "netns", "exec", NS])
                script = " ".join(f"'{x}'" for x in fio + common)
            args = ["ip", "netns", "exec", NS, "bash", "-c", script]
        else:
            server_pid = h.server.pid
            if path == "libnfs":
                url = f"nfs://127.0.0.1{h.export}?version=3&nfsport={h.nfs_port}&mountport={h.mount_port}"
                fio = [FIO_LIBNFS, "--ioengine=nfs", f"--nfs_url={url}", "--filename=data-libnfs"]
                if ("ours", path) not in laid_out:
                    laid_out.add(("ours", path))
                    matrix.lay_out(fio, p["size"], depth=1)
                args = fio + common
            else:
                args = kernel_mount_args(h, path.split("-")[1], common)
        cell = {"transport": "tcp" if not path.startswith("kernel") else path.split("-")[1], "path": path,
                "server": server, "workload": rw, "bs": bs, "iodepth": depth}
        try:
            cell.update(measure(h, args, out, p["repeats"], rw, [server_pid], server_pid=server_pid,
                                p_seconds=p["seconds"]))
        except Exception as e:  # a peer failing is a finding, not the end of the run
            cell["error"] = str(e)[:300]
        result["peers"].append(cell)
        done = cell.get("bw_MiBps", {}).get("median")
        prog.step(f"{server:14} {path:7} {matrix.LABEL[rw]:10} {bs:>3} QD{depth:<2}  " +
                  (f"{done:8.0f} MiB/s" if done is not None else f"failed: {cell.get('error', '')[:60]}"))


def kernel_mount_args(h, proto, common):
    """The kernel NFS client on this host's export: mount, fio, unmount."""
    mnt = os.path.join(h.work, f"mnt-kernel-{proto}")
    os.makedirs(mnt, exist_ok=True)
    port = h.rdma_port if proto == "rdma" else h.nfs_port
    opts = f"vers=3,proto={proto},port={port},mountport={h.mount_port},nolock"
    fio = " ".join(f"'{x}'" for x in matrix.file_args(os.path.join(mnt, "data-kernel")) + common)
    return ["bash", "-c", f"mount -t nfs -o {opts} 127.0.0.1:{h.export} {mnt} && {{ {fio}; s=$?; umount {mnt}; exit $s; }}"]
