# Sourced inside the guest: two soft-RDMA "hosts" joined by one veth link
# (a second one for the multi-rail cell: second_rail_up).
#   server side: v0 $SERVER_IP, rxe0      client side: v1 $CLIENT_IP, rxe1
# (soft-RoCE), or siw0 and siw1 (soft-iWARP) after `rdma_devices siw`.
# Both ends stay in the initial network namespace, because 6.1's rdma_rxe
# receives RoCEv2 (UDP 4791) only there. Policy routing sends what this host
# sends to either address out of the other end's veth, so every packet between
# them crosses the link as RoCEv2 or TCP, where tshark sees it on v0, and
# each end's soft-RoCE device carries its own side.
SERVER_IP=10.99.0.1 CLIENT_IP=10.99.0.2
# The kernel's nfsd: NFS on TCP 2049 and RDMA 20049, MOUNT on 20048. Ours:
# NFS over TCP, MOUNT, NFS over RPC-RDMA.
PORT=2050 MPORT=20058 RPORT=20059
NFSD=${GUEST:?}/nfsd/usr/sbin

guest_log() { echo "guest: $*"; }

rdma_net_up() {
  local m
  for m in veth rdma_ucm ib_uverbs rpcrdma nfsd nfsv3 fuse crc32_generic; do
    modprobe "$m" || { guest_log "modprobe $m failed"; return 1; }
  done
  ip link set lo up
  ip link add v0 type veth peer name v1
  ip addr add "$SERVER_IP/24" dev v0
  ip addr add "$CLIENT_IP/24" dev v1
  local i
  for i in all default v0 v1; do
    sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
  done
  # 9000-byte frames: RoCE MTU 4096, a quarter of the packets of 1500.
  ip link set v0 mtu 9000 up && ip link set v1 mtu 9000 up
  # Each end's receive on one CPU: a veth hands packets sent from two CPUs to
  # two backlogs, which reorders a queue pair's packets; 6.1's rxe answers
  # with a PSN sequence NAK and then stalls that queue pair until the NFS
  # client times out (seen as 10-60 s pauses under nconnect=4). A NIC does not
  # reorder within a queue pair.
  echo 1 >/sys/class/net/v0/queues/rx-0/rps_cpus
  echo 1 >/sys/class/net/v1/queues/rx-0/rps_cpus
  # A receive backlog for what RDMA puts in flight: a 4 MiB RDMA Read's
  # response is 1,024 packets, and four of them overran the default 1,000,
  # dropping packets that rxe then waited out (4 MiB WRITEs at 3 MB/s). A
  # NIC's receive ring is not a softirq backlog.
  sysctl -qw net.core.netdev_max_backlog=16384
  # Local delivery after the link rules; locally sent packets (iif lo) for
  # the other end leave through the other end's veth.
  ip rule add pref 1000 lookup local
  ip rule del pref 0 lookup local
  ip route add "$SERVER_IP/32" dev v1 src "$CLIENT_IP" table 101
  ip route add "$CLIENT_IP/32" dev v0 src "$SERVER_IP" table 102
  ip rule add pref 100 iif lo to "$SERVER_IP/32" lookup 101
  ip rule add pref 101 iif lo to "$CLIENT_IP/32" lookup 102
  rdma_devices rxe
}

# second_rail_up: a second link beside the first, for multi-rail: v2
# $SERVER_IP2 (rxe2) and v3 $CLIENT_IP2 (rxe3), routed as the first.
# second_rail_down removes it.
SERVER_IP2=10.99.1.1 CLIENT_IP2=10.99.1.2
second_rail_up() {
  ip link add v2 type veth peer name v3 || return 1
  ip addr add "$SERVER_IP2/24" dev v2
  ip addr add "$CLIENT_IP2/24" dev v3
  local i
  for i in v2 v3; do sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"; done
  ip link set v2 mtu 9000 up && ip link set v3 mtu 9000 up
  echo 1 >/sys/class/net/v2/queues/rx-0/rps_cpus
  echo 1 >/sys/class/net/v3/queues/rx-0/rps_cpus
  second_rail_routes
  ip rule add pref 102 iif lo to "$SERVER_IP2/32" lookup 103
  ip rule add pref 103 iif lo to "$CLIENT_IP2/32" lookup 104
  rdma link add rxe2 type rxe netdev v2 && rdma link add rxe3 type rxe netdev v3
}
# Taking a link down drops the routes through it; these put them back.
second_rail_routes() {
  ip route replace "$SERVER_IP2/32" dev v3 src "$CLIENT_IP2" table 103
  ip route replace "$CLIENT_IP2/32" dev v2 src "$SERVER_IP2" table 104
}
second_rail_down() {
  rdma link delete rxe2; rdma link delete rxe3
  ip rule del pref 102; ip rule del pref 103
  ip link del v2
}

# rdma_devices rxe|siw: the veth ends' RDMA devices become soft-RoCE or
# soft-iWARP (the other kind's are deleted first: one device per netdev).
# siw.ko is built by prepare.sh; siw counts registered memory against
# RLIMIT_MEMLOCK even for root (rxe does not), so its users need `ulimit -l`.
rdma_devices() {
  local kind=$1 other=rxe dev
  [ "$kind" = rxe ] && other=siw
  for dev in ${other}0 ${other}1; do
    [ -e "/sys/class/infiniband/$dev" ] && { rdma link delete "$dev" || return 1; }
  done
  if ! modprobe "$([ "$kind" = rxe ] && echo rdma_rxe || echo siw)"; then
    guest_log "no $kind module: $(tail -1 "$GUEST/siw.failed" 2>/dev/null || echo "modprobe failed")"
    return 1
  fi
  rdma link add ${kind}0 type "$kind" netdev v0 && rdma link add ${kind}1 type "$kind" netdev v1
}

# kernel_nfsd_up DIR [MAX_BLOCK]: the kernel's nfsd, NFSv3 only, with lockd and rpc.statd, exporting DIR
# on TCP and RDMA; MAX_BLOCK sets its largest transfer (by default it scales
# with the guest's memory: 512 KiB in 3 GiB). Its userland was unpacked for
# the guest only, by prepare.sh.
kernel_nfsd_up() {
  mkdir -p /var/lib/nfs/v4recovery
  mount -t nfsd nfsd /proc/fs/nfsd || return 1
  rpcbind -w || return 1
  echo "$1 *(rw,no_root_squash,insecure,no_subtree_check,fsid=1)" >/etc/exports
  "$NFSD/exportfs" -ra 2>/dev/null
  [ -z "${2:-}" ] || echo "$2" >/proc/fs/nfsd/max_block_size
  # The status monitor lockd needs to grant locks (and the kernel client to take them).
  mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak && rpc.statd --no-notify || return 1
  "$NFSD/rpc.mountd" -p 20048 || return 1
  "$NFSD/rpc.nfsd" -N 4 -N 4.1 -N 4.2 8 || return 1
  echo "rdma 20049" >/proc/fs/nfsd/portlist
}

# ours_up DIR LOG [ARG...]: nfsrdma-server on verbs exporting DIR, with any
# further arguments given, listening on every
# address (so verbs must open the domain of the device a client comes in on),
# its output appended to LOG. Started in a subshell, so no shell owns it as a
# job and says "Killed" when it is (pgrep finds it by its command line).
ours_up() {
  ("${BUILD:?}/server/nfsrdma-server" --provider verbs --port $PORT --mount-port $MPORT --rdma-port $RPORT \
    --no-register --state-dir /tmp/state --export "$1 *(rw,no_root_squash)" "${@:3}" >>"$2" 2>&1 &)
  local i
  for i in $(seq 100); do
    grep -q "listening: NFSv3 on tcp" "$2" 2>/dev/null && (exec 3<>"/dev/tcp/$SERVER_IP/$PORT") 2>/dev/null &&
      return 0
    sleep 0.1
  done
  echo "nfsrdma-server did not start"; return 1
}
