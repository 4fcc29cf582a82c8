#!/usr/bin/env bash
# 64 connections to one server (4 mounts with nconnect=16, over TCP and over
# RPC-RDMA), all moving data at once, with the server's limit at 64 per
# transport; one more is refused with a clear message, and nothing crashes.
. "$(dirname "$0")/common.sh"
[ -w /dev/fuse ] || skip "no /dev/fuse"
EXPORT=$WORK/export
mkdir -p "$EXPORT"
SERVER_EXTRA="--max-connections 64" RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
for proto in tcp rdma; do
  port=$([ $proto = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  for i in 1 2 3 4; do
    m=$WORK/mnt-$proto-$i; mkdir -p "$m"
    "$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$m" -o "proto=$proto,provider=tcp,port=$port,mountport=$MOUNT_PORT,nconnect=16" ||
      fail "mount $i over $proto (connections $(( (i - 1) * 16 + 1 ))..$((i * 16)))"
  done
  pids=()
  for i in 1 2 3 4; do
    ( for j in $(seq 16); do head -c 1M /dev/urandom >"$WORK/mnt-$proto-$i/$proto-$i-$j" || exit 1; done
      for j in $(seq 16); do cmp -s "$WORK/mnt-$proto-$i/$proto-$i-$j" "$EXPORT/$proto-$i-$j" || exit 1; done ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "I/O over one of the $proto mounts failed"; done
  m=$WORK/mnt-$proto-5; mkdir -p "$m"
  if "$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$m" -o "proto=$proto,provider=tcp,port=$port,mountport=$MOUNT_PORT,soft,timeo=20,retrans=1" 2>"$WORK/refused"; then
    ls "$m" >/dev/null 2>&1 && fail "a 65th $proto connection was served"
  fi
  grep -q "at the limit of 64 connections" "$LOG" || fail "the server did not log the refusal over $proto"
  kill -0 "$SERVER_PID" || fail "the server died"
  echo "ok: 64 $proto connections served at once; the 65th refused with a clear message"
  for i in 1 2 3 4 5; do umount "$WORK/mnt-$proto-$i" 2>/dev/null || true; done
done
