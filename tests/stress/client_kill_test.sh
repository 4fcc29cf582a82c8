#!/usr/bin/env bash
# Clients killed with SIGKILL in the middle of writes, over RPC-RDMA and TCP:
# the server frees each connection's credits and registered memory (the
# metrics return to what they were before), keeps no descriptors once the files
# its writes kept open have closed (2 s unused), its resident
# memory comes back to within 32 MiB of where it started and, in the long
# version, grows by at most 4 MiB over the second 50 kills (a leak of even
# 100 KiB a kill would show; the allocator fills its arenas over the first 20
# or so and then stays flat), and the next client works. make test: 10 kills;
# make stress: 100.
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
: "${FIO_ENGINE:?set FIO_ENGINE to nfsrdma.so}"
KILLS=$(long 10 100)
EXPORT=$WORK/export
mkdir -p "$EXPORT"
MET=127.0.0.1:$(free_port)
SERVER_EXTRA="--metrics $MET" RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
job() {  # transport extra-args...; `exec` so that `job ... &` leaves $! naming fio itself
  local t=$1; shift
  exec fio --name=k --ioengine="external:$FIO_ENGINE" --nfs_export="127.0.0.1:$EXPORT" --nfs_transport="$t" \
    --nfs_port="$([ "$t" = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")" --nfs_mount_port="$MOUNT_PORT" \
    --nfs_provider=tcp "$@"
}
(job rdma --filename=warm --rw=write --bs=1M --size=64M --iodepth=16 >/dev/null) || fail "warm-up job"
idle() {  # until the server has no RDMA connection and no request in progress
  for _ in $(seq 100); do
    [ "$(metric "$MET" 'nfsrdma_server_connections{transport="rdma"}')" = 0 ] &&
      [ "$(metric "$MET" nfsrdma_server_rdma_credits_in_use)" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}
idle || fail "the warm-up client's connection did not close"
rss0=$(rss_kib "$SERVER_PID") fds0=$(fds "$SERVER_PID")
reg0=$(metric "$MET" 'nfsrdma_rdma_registered_bytes{access="local"}')/$(metric "$MET" 'nfsrdma_rdma_registered_bytes{access="remote"}')
for i in $(seq "$KILLS"); do
  t=$([ $((i % 2)) = 0 ] && echo rdma || echo tcp)
  # --thread: one process, so SIGKILL takes the whole client (fio forks job processes otherwise).
  job "$t" --thread --filename="k$i" --rw=write --bs=1M --size=4G --iodepth=32 --time_based --runtime=60 >/dev/null 2>&1 &
  pid=$!
  sleep 0.$((RANDOM % 4 + 3))
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  if [ "$KILLS" -ge 40 ] && [ "$i" = $((KILLS / 2)) ]; then
    idle || true
    sleep 6  # the server trims its heap every 5 s
    rss_mid=$(rss_kib "$SERVER_PID")
  fi
done
idle || true
[ "$(metric "$MET" 'nfsrdma_server_connections{transport="rdma"}')" = 0 ] || fail "RDMA connections left open after $KILLS kills"
[ "$(metric "$MET" nfsrdma_server_rdma_credits_in_use)" = 0 ] || fail "credits still in use after $KILLS kills"
# Files the writes kept open close after 2 s unused (server/open_files.hpp).
for _ in $(seq 50); do [ "$(metric "$MET" nfsrdma_server_open_files)" = 0 ] && break; sleep 0.1; done
[ "$(metric "$MET" nfsrdma_server_open_files)" = 0 ] || fail "files still open 5 s after the last client"
sleep 1
rss1=$(rss_kib "$SERVER_PID") fds1=$(fds "$SERVER_PID")
reg1=$(metric "$MET" 'nfsrdma_rdma_registered_bytes{access="local"}')/$(metric "$MET" 'nfsrdma_rdma_registered_bytes{access="remote"}')
[ "$reg1" = "$reg0" ] || fail "registered memory (local/remote bytes) went from $reg0 to $reg1"
[ "$fds1" -le "$fds0" ] || fail "server descriptors grew from $fds0 to $fds1"
# Freed heap goes back to the system within 5 s (the server trims); live memory stays.
grew_late() { [ -n "${rss_mid:-}" ] && [ "$rss1" -gt $((rss_mid + 4096)) ]; }
for _ in $(seq 30); do
  [ "$rss1" -le $((rss0 + 32768)) ] && ! grew_late && break
  sleep 0.5
  rss1=$(rss_kib "$SERVER_PID")
done
[ "$rss1" -le $((rss0 + 32768)) ] || fail "server memory grew from $rss0 KiB to $rss1 KiB"
! grew_late || fail "server memory grew from $rss_mid KiB after $((KILLS / 2)) kills to $rss1 KiB after $KILLS"
(job rdma --filename=after --rw=write --bs=64k --size=32M --iodepth=8 --verify=crc32c --verify_fatal=1 >"$WORK/after" 2>&1) ||
  { cat "$WORK/after"; fail "a client after the kills failed"; }
echo "ok: $KILLS clients killed mid-write; connections 0, credits 0, registered bytes (local/remote) $reg0 -> $reg1, fds $fds0 -> $fds1, RSS $rss0 -> ${rss_mid:+$rss_mid (half-way) -> }$rss1 KiB; the next client verified"
