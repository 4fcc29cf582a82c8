#!/usr/bin/env bash
# A server killed with SIGKILL during a large write through a hard mount, and
# restarted 2 s later: the write completes and the file is byte-identical
# (uncommitted data is sent again when the write verifier changes).
# Run by make stress (STRESS=1): 1 GiB, 10 times per transport; by hand without
# STRESS=1: 256 MiB, once per transport. Not in make test.
. "$(dirname "$0")/common.sh"
[ -w /dev/fuse ] || skip "no /dev/fuse"
SIZE_MIB=$(long 256 1024) REPS=$(long 1 10)
EXPORT=$WORK/export MNT=$WORK/mnt
mkdir -p "$EXPORT" "$MNT"
RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/src"
for proto in rdma tcp; do
  port=$([ $proto = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  "$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$MNT" -o "proto=$proto,provider=tcp,port=$port,mountport=$MOUNT_PORT,hard" ||
    fail "mount over $proto"
  for rep in $(seq "$REPS"); do
    rm -f "$EXPORT/copy"
    dd if="$WORK/src" of="$MNT/copy" bs=1M conv=fsync status=none &
    writer=$!
    # Kill once a quarter is on the server's disk.
    for _ in $(seq 600); do
      [ "$(stat -c %s "$EXPORT/copy" 2>/dev/null || echo 0)" -ge $((SIZE_MIB << 18)) ] && break; sleep 0.01
    done
    kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
    sleep 2
    launch_server
    wait "$writer" || fail "$proto rep $rep: the write failed after the restart"
    cmp -s "$WORK/src" "$EXPORT/copy" || fail "$proto rep $rep: the file differs after the restart"
    echo "ok: $proto rep $rep: $SIZE_MIB MiB written through a server SIGKILL + restart, byte-identical"
  done
  umount "$MNT"
done
