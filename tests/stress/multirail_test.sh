#!/usr/bin/env bash
# Multi-rail over TCP: a mount spread over two links (two veth pairs into a
# network namespace, standing for two NICs), one link taken down for 4 s in
# the middle of a verified write. Nothing is lost, the other link carries
# every call while it is down, and both carry calls before and after; then
# the fio engine over RPC-RDMA (tcp provider) spreads its calls over the two
# local addresses. The same over RPC-RDMA on soft-RoCE is the kernel suite's
# verbs_multirail cell (MULTIRAIL_PROTOS="rdma tcp" runs both here).
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
: "${FIO_ENGINE:?set FIO_ENGINE to nfsrdma.so}"
NS=nfsrdma-mr-$$ A=10.215.$(( $$ % 250 + 1 )) B=10.216.$(( $$ % 250 + 1 ))
on_exit "umount -l $WORK/mnt 2>/dev/null; ip netns pids $NS 2>/dev/null | xargs -r kill -9; ip netns del $NS; \
ip link del mra$$h 2>/dev/null; ip link del mrb$$h 2>/dev/null"
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
for rail in a b; do
  net=$([ $rail = a ] && echo "$A" || echo "$B")
  ip link add "mr$rail$$h" type veth peer name "mr$rail$$p"
  ip link set "mr$rail$$p" netns "$NS"
  ip addr add "$net.1/24" dev "mr$rail$$h" && ip link set "mr$rail$$h" up
  ip netns exec "$NS" ip addr add "$net.2/24" dev "mr$rail$$p"
  ip netns exec "$NS" ip link set "mr$rail$$p" up
done
EXPORT=$WORK/export MNT=$WORK/mnt
mkdir -p "$EXPORT" "$MNT"
SMET=$(free_port)
BIND=0.0.0.0 RDMA=1 SERVER_EXTRA="--metrics 127.0.0.1:$SMET" start_server "$EXPORT $A.0/24(rw,no_root_squash,insecure) $B.0/24(rw,no_root_squash,insecure)"
# In the namespace's network only: `ip netns exec` would also give the mount a
# mount namespace of its own, where fio and cmp would not see it.
in_ns() { nsenter --net="/run/netns/$NS" "$@"; }
RAILS="remoteaddrs=$A.1~$B.1,localaddrs=$A.2~$B.2"
# calls N: the calls sent on connection N so far (the mount's metrics).
calls() {
  ip netns exec "$NS" curl -sf "http://127.0.0.1:$MET/metrics" |
    awk -v c="connection=\"$1\"" '$1 ~ /^nfsrdma_client_connection_calls_total\{/ && index($1, c) {print $2}'
}
up() { ip netns exec "$NS" curl -sf "http://127.0.0.1:$MET/metrics" |
  awk -v c="connection=\"$1\"" '$1 ~ /^nfsrdma_client_connection_up\{/ && index($1, c) {print $2}'; }
for t in ${MULTIRAIL_PROTOS:-tcp}; do
  MET=$(free_port)
  port=$([ $t = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  in_ns "$NFSRDMA_FUSE" -o "proto=$t,provider=tcp,port=$port,mountport=$MOUNT_PORT,$RAILS,timeo=10,metrics=127.0.0.1:$MET" \
    "$A.1:$EXPORT" "$MNT" || fail "$t: the two-rail mount failed"
  # 320 MiB at 32 MiB/s (10 s), each block checked when read back.
  in_ns fio --name=rails --directory="$MNT" --filename="rails-$t" --size=320M --bs=1M --rw=write \
    --rate=32m --verify=crc32c --verify_fatal=1 --do_verify=1 >"$WORK/fio-$t.log" 2>&1 &
  fio_pid=$!
  sleep 1.5
  b0=$(calls 0) b1=$(calls 1)
  ip link set "mrb$$h" down
  sleep 4
  d0=$(calls 0) d1=$(calls 1)
  ip link set "mrb$$h" up
  for _ in $(seq 100); do [ "$(up 1)" = 1 ] && break; sleep 0.1; done
  [ "$(up 1)" = 1 ] || fail "$t: the pulled link did not come back within 10 s"
  sleep 1.5
  a0=$(calls 0) a1=$(calls 1)
  wait "$fio_pid" || { tail -20 "$WORK/fio-$t.log"; fail "$t: the verified write failed across the link loss"; }
  grep -q "err= 0" "$WORK/fio-$t.log" || { tail -20 "$WORK/fio-$t.log"; fail "$t: fio reported errors"; }
  echo "$t: calls per link (a, b): before the pull $b0, $b1; while b was down +$((d0 - b0)), +$((d1 - b1));" \
       "after it came back +$((a0 - d0)), +$((a1 - d1))"
  [ "$b0" -gt 0 ] && [ "$b1" -gt 0 ] || fail "$t: both links did not carry calls before the pull"
  [ $((d0 - b0)) -gt 20 ] || fail "$t: link a did not carry the calls while b was down"
  # b may take the calls it was given in the moment before it was found down.
  [ $((d1 - b1)) -le 16 ] || fail "$t: link b carried $((d1 - b1)) calls while down"
  [ $((a0 - d0)) -gt 0 ] && [ $((a1 - d1)) -gt 0 ] || fail "$t: both links did not carry calls after b came back"
  cmp "$MNT/rails-$t" "$EXPORT/rails-$t" || fail "$t: the file differs on the server"
  umount "$MNT" || fail "$t: unmount failed"
  echo "ok: $t: 320 MiB written and verified across the loss of one of two links"
done
# The fio engine: connections from both local addresses, as the server counts its clients.
from() { curl -sf "http://127.0.0.1:$SMET/metrics" | awk -v c="client=\"$1\"" '$1 ~ /^nfsrdma_server_client_calls_total\{/ && index($1, c) {print $2}'; }
ea=$(from "$A.2") eb=$(from "$B.2")
ip netns exec "$NS" fio --name=engine --ioengine="external:$FIO_ENGINE" --nfs_export="$A.1:$EXPORT" \
  --nfs_port="$RDMA_PORT" --nfs_mount_port="$MOUNT_PORT" --nfs_provider=tcp --nfs_nconnect=2 \
  --nfs_remoteaddrs="$A.1~$B.1" --nfs_localaddrs="$A.2~$B.2" --filename=engine --size=32M --bs=64k --iodepth=8 \
  --rw=write --verify=crc32c --verify_fatal=1 --do_verify=1 >"$WORK/fio-engine.log" 2>&1 ||
  { tail -20 "$WORK/fio-engine.log"; fail "the fio engine over two links failed"; }
ea=$(( $(from "$A.2") - ea )) eb=$(( $(from "$B.2") - eb ))
echo "fio engine: calls from $A.2 $ea, from $B.2 $eb (1,024 written and read back)"
[ "$ea" -gt 200 ] && [ "$eb" -gt 200 ] || fail "the fio engine did not spread its calls over both local addresses"
echo "ok: the fio engine spread its calls over both local addresses"
