#!/usr/bin/env bash
# The link cut for 5 s in the middle of a verified fio run, over RPC-RDMA and
# TCP: the client sits in a network namespace joined by a veth pair, the
# server listens on the host's end, and the host's end goes down and up.
# The run completes and crc32c verification passes.
# make test: 512 MiB per transport; make stress: 4 GiB.
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
: "${FIO_ENGINE:?set FIO_ENGINE to nfsrdma.so}"
SIZE=$(long 512M 4G)
veth_netns cut 214
EXPORT=$WORK/export
mkdir -p "$EXPORT"
BIND=$NET.1 RDMA=1 start_server "$EXPORT $NET.0/24(rw,no_root_squash,insecure)"
for t in rdma tcp; do
  port=$([ $t = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  ip netns exec "$NS" fio --name=cut --ioengine="external:$FIO_ENGINE" --nfs_export="$NET.1:$EXPORT" \
    --nfs_transport="$t" --nfs_port="$port" --nfs_mount_port="$MOUNT_PORT" --nfs_provider=tcp \
    --filename="cut-$t" --size="$SIZE" --rw=write --bs=256k --iodepth=8 --rate=128m \
    --verify=crc32c --verify_fatal=1 --do_verify=1 >"$WORK/fio-$t.log" 2>&1 &
  fio_pid=$!
  sleep 1.5
  ip link set "$VETH_HOST_IF" down
  sleep 5
  ip link set "$VETH_HOST_IF" up
  wait "$fio_pid" || { tail -20 "$WORK/fio-$t.log"; fail "$t: fio failed across the link cut"; }
  grep -q "err= 0" "$WORK/fio-$t.log" || { tail -20 "$WORK/fio-$t.log"; fail "$t: fio reported errors"; }
  echo "ok: $t: $SIZE written and crc32c-verified across a 5 s link cut"
done
