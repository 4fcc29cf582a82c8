#!/usr/bin/env bash
# 64 connections to one server (4 mounts with nconnect=16, over TCP and over
# RPC-RDMA), all moving data at once, with the server's limit at 64 per
# transport. One more is served by closing the longest-idle connection (said
# once in the log), and every mount, the one that lost a connection too,
# still reads its files back: its client reconnects.
. "$(dirname "$0")/common.sh"
[ -w /dev/fuse ] || skip "no /dev/fuse"
EXPORT=$WORK/export
mkdir -p "$EXPORT"
SERVER_EXTRA="--max-connections 64 --max-connections-per-address 100" RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
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
  sleep 1
  m=$WORK/mnt-$proto-5; mkdir -p "$m"
  "$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$m" -o "proto=$proto,provider=tcp,port=$port,mountport=$MOUNT_PORT" ||
    fail "a 65th $proto connection was refused while 64 idle ones were held"
  ls "$m" >/dev/null || fail "the 65th $proto connection's mount cannot list"
  grep -q "$proto: evicting the longest-idle connection" "$LOG" || fail "the server did not log the eviction over $proto"
  for i in 1 2 3 4; do
    for j in 1 16; do
      cmp -s "$WORK/mnt-$proto-$i/$proto-$i-$j" "$EXPORT/$proto-$i-$j" || fail "mount $i over $proto lost its files"
    done
  done
  kill -0 "$SERVER_PID" || fail "the server died"
  echo "ok: 64 $proto connections served at once; a 65th made room by closing the longest-idle, and every mount still reads"
  for i in 1 2 3 4 5; do umount "$WORK/mnt-$proto-$i" 2>/dev/null || true; done
done
