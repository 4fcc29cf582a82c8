#!/usr/bin/env bash
# Network locks between two client hosts: nfsrdma-fuse in a network namespace
# (RPC-RDMA, tcp provider) and on this host (TCP), both mounting
# nfsrdma-server, which serves PORTMAP on the veth address so each finds its
# NLM. flock and fcntl conflicts and a blocked lock granted across hosts,
# SQLite with one writer per host, and the namespace's client SIGKILLed and
# mounted again: its first lock frees what the killed one held.
. "$(dirname "$0")/common.sh"
command -v ip >/dev/null || skip "iproute2 is not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) is not installed"
command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
veth_netns locks 216
EXPORT=$WORK/export
mkdir -p "$EXPORT" "$WORK/a" "$WORK/b"
BIND=$NET.1 RDMA=1 SERVER_EXTRA="--portmap --grace 2" start_server "$EXPORT $NET.0/24(rw,no_root_squash)"
# The namespace's network only: the mount it makes is seen here too.
in_ns() { nsenter --net="/run/netns/$NS" "$@"; }
mount_a() {
  in_ns "$NFSRDMA_FUSE" "$NET.1:$EXPORT" "$WORK/a" \
    -o "proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT" || fail "host A could not mount"
}
mount_a
"$NFSRDMA_FUSE" "$NET.1:$EXPORT" "$WORK/b" -o "proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT" ||
  fail "host B could not mount"
A=$WORK/a B=$WORK/b
echo data >"$A/f"

# flock: refused across hosts while held, granted when let go.
in_ns flock -x "$A/f" -c 'sleep 2' &
holder=$!
sleep 0.7
flock -n -x "$B/f" true && fail "host B got a flock host A holds"
t0=$(date +%s%N)
timeout 20 flock -x "$B/f" true || fail "host B's blocked flock was never granted"
wait "$holder"
echo "ok: flock across hosts: refused while held, granted $((($(date +%s%N) - t0) / 1000000)) ms after asking"

# fcntl ranges: host A's write lock, host B's F_GETLK and its lock beside it.
in_ns python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)
time.sleep(4)' "$A/f" &
holder=$!
sleep 1
python3 - "$B/f" <<'PY' || fail "fcntl across hosts"
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 5, 5)
    sys.exit("host B read-locked a range host A write-locks")
except BlockingIOError:
    pass
t, _, start, length, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 5, 1, 0)))
assert (t, start, length) == (fcntl.F_WRLCK, 0, 10), (t, start, length)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 10)
PY
wait "$holder"
echo "ok: fcntl across hosts: conflict refused, F_GETLK names the range, the range beside it granted"

# FREE_ALL (what a host's own status monitor sends its lock manager) from
# another host is ignored: host B's lock stays.
flock -x "$B/f" -c 'sleep 3' &
holder=$!
sleep 0.7
b_name=$(sed -n "s/.*nsm: \(.*\) ($NET.1:[0-9]*) restarted.*/\1/p;T;q" "$LOG")
[ -n "$b_name" ] || fail "no SM_NOTIFY from host B in the server's log"
nlm_port=$(sed -n 's/.*NLMv4 and NSMv1 (network locks) on tcp port \([0-9]*\).*/\1/p' "$LOG" | tail -1)
in_ns python3 - "$NET.1" "$nlm_port" "$b_name" <<'PY' || fail "FREE_ALL from host A was not answered"
import socket, struct, sys
host, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
pad = (4 - len(name) % 4) % 4
args = struct.pack(">I", len(name)) + name + b"\0" * pad + struct.pack(">i", 7)
call = struct.pack(">IIIIIIIIII", 0x5eed, 0, 2, 100021, 4, 23, 0, 0, 0, 0) + args
s = socket.create_connection((host, port), timeout=5)
s.sendall(struct.pack(">I", 0x80000000 | len(call)) + call)
mark = s.recv(4)
assert len(mark) == 4, "no reply"
PY
flock -n -x "$A/f" true && fail "FREE_ALL from another host released host B's lock"
wait "$holder"
echo "ok: FREE_ALL from another host is ignored"

# SQLite: one writer per host, each transaction inserting the row count it saw.
sqlite3 "$B/db" "CREATE TABLE t (host TEXT, i INTEGER, seen INTEGER); PRAGMA journal_mode=DELETE;" >/dev/null
writer() {  # HOST PATH N
  python3 - "$@" <<'PY'
import sqlite3, sys
host, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(path, timeout=120, isolation_level=None)
for i in range(n):
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t SELECT ?, ?, count(*) FROM t", (host, i))
    db.execute("COMMIT")
PY
}
N=1000 t0=$SECONDS
in_ns bash -c "$(declare -f writer); writer a '$A/db' $N" & wa=$!
writer b "$B/db" $N & wb=$!
wait $wa || fail "host A's writer failed"
wait $wb || fail "host B's writer failed"
[ "$(sqlite3 "$EXPORT/db" 'PRAGMA integrity_check')" = ok ] || fail "the database is damaged"
[ "$(sqlite3 "$EXPORT/db" 'SELECT count(*), count(DISTINCT seen) FROM t')" = "$((2 * N))|$((2 * N))" ] ||
  fail "rows: $(sqlite3 "$EXPORT/db" 'SELECT count(*), count(DISTINCT seen) FROM t'), want $((2 * N)) and as many counts"
echo "ok: SQLite, $N transactions from each host in $((SECONDS - t0)) s: integrity ok, $((2 * N)) rows, every count seen once"

# Host A's client killed while it holds a lock; a new one on the same mount point frees it.
in_ns python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
time.sleep(60)' "$A/f" &
holder=$!
sleep 1
kill -9 "$(pgrep -f "nfsrdma-fuse $NET.1:$EXPORT $WORK/a")"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true
umount -l "$WORK/a"
flock -n -x "$B/f" true && fail "the killed client's lock was gone before its successor started"
mount_a
in_ns flock -x "$A/db" true || fail "the new client on host A could not lock"
flock -n -x "$B/f" true || fail "the killed client's lock outlived its successor's first lock"
echo "ok: a killed client's locks are freed by the first lock of its successor on the same mount point"
umount "$WORK/a" "$WORK/b"
grep -q "$NET.2" "$LOG" || fail "the server never saw host A's address"
