#!/usr/bin/env bash
# The kernel interop matrix, run inside the soft-RoCE guest (tests/guest/kernel_test.sh
# boots it): the Linux kernel's NFSv3 client and nfsd against nfsrdma-server,
# nfsrdma-fuse and the fio engine on libfabric's verbs provider (rxe), every
# cell byte-verified, plus the project's own RDMA tests on verbs and a RoCEv2
# capture decoded by tshark; then the same links carry soft-iWARP (siw) for
# the cells that meet iWARP's own paths. Prints TAP; a cell's "figure:" lines go to
# $RESULTS/figures.txt, its full output to $RESULTS/<cell>.log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../tools/guest/lib.sh"
: "${BUILD:?}" "${RESULTS:?}" "${GUEST:?}"
SERVER=$BUILD/server/nfsrdma-server FUSE=$BUILD/client/fuse/nfsrdma-fuse ENGINE=$BUILD/fio-engine/nfsrdma.so
KOPT=vers=3,nolock,hard
OURS_KOPT=$KOPT,mountport=$MPORT,mountproto=tcp

n=0 failed=0
# cell NAME FUNCTION ARGS...: one TAP test, run as a process of its own (this
# script with --cell) that is ended after CELL_TIMEOUT seconds; its output is kept.
cell() {
  local name=$1; shift
  [ -z "${only:-}" ] || [[ $name =~ $only ]] || return 0
  n=$((n + 1))
  local log=$RESULTS/$name.log t0=$SECONDS
  if timeout -k 10 "${CELL_TIMEOUT:-300}" bash "$HERE/kernel_cases.sh" --cell "$@" >"$log" 2>&1; then
    echo "ok $n - $name ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    echo "not ok $n - $name ($((SECONDS - t0)) s)"
    tail -25 "$log" | sed 's/^/# /'
  fi
  grep '^figure:' "$log" | sed "s/^figure:/$name:/" >>"$RESULTS/figures.txt"
}
# A cell's check failed: the cell (a process of its own) ends here, and
# leaves no mount and no NAT rule behind for the next one.
die() { echo "$*"; exit 1; }
answers() {  # PORT: true once something accepts on $SERVER_IP:PORT, within 10 s
  local i
  for i in $(seq 100); do (exec 3<>"/dev/tcp/$SERVER_IP/$1") 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
leave_no_mounts() {
  local m
  # What multirail leaves when it fails: its verified write, which would
  # keep the lazily unmounted /mnt/a's daemon and its RDMA devices, and its
  # own server (left, iwarp_up's removal of the RoCE devices hangs: a CI
  # run's guest ran out of time so).
  pkill -f "fio --name=rails " && sleep 0.5
  pkill -f "nfsrdma-server --provider verbs --port 2080 "
  for m in /mnt/a /mnt/b; do mountpoint -q "$m" && umount -l "$m"; done
  # What kernel_locks_on_ours leaves when it fails: its port-111 redirect
  # (left, it sends every later mount of the kernel's nfsd to our lock
  # server's portmapper) and its lock server (left, it keeps the kernel's
  # RPC-RDMA connection, and iwarp_up's removal of the RoCE device hangs).
  nft delete table ip nfsrdma_locks 2>/dev/null
  pkill -f "nfsrdma-server --provider verbs --port ${LPORT:-2060} "
  return 0
}

setup() {
  rdma_net_up || return 1
  mkdir -p /srv/kernel /srv/ours /mnt/a /mnt/b /tmp/state
  mount -t tmpfs -o size=768m tmpfs /srv/kernel
  mount -t tmpfs -o size=768m tmpfs /srv/ours
  # The gtest suites' exports: a filesystem that gives file handles (the
  # guest's / is an overlay, which does not).
  mkdir -p /srv/scratch && mount -t tmpfs -o size=512m tmpfs /srv/scratch
  kernel_nfsd_up /srv/kernel || return 1
  start_ours
  # What every cell copies: sizes around page, chunk and inline boundaries.
  mkdir -p /tmp/src/d1/d2 /tmp/src/empty-dir
  local s
  for s in 0 1 1023 1024 4095 4096 4097 65537 1048579 3145728; do
    head -c "$s" /dev/urandom >"/tmp/src/f$s"
  done
  head -c 200000 /dev/urandom >"/tmp/src/d1/d2/deep file"
  ln -s f4096 /tmp/src/link
  chmod 0750 /tmp/src/f1023
  dd if=/dev/urandom of=/tmp/big bs=1M count=64 status=none
}

start_ours() { ours_up /srv/ours "$RESULTS/server.log" --metrics 127.0.0.1:9320; }
# Changes of names and attributes our server ran on the thread that received
# them (ran) or passed to a worker (worker): /srv/ours is tmpfs, which has
# nothing to commit, so they run there.
inline_changes() {  # ran|worker
  curl -sf http://127.0.0.1:9320/metrics | awk -v r="$1" '
    $1 == "nfsrdma_server_inline_calls_total{kind=\"change\",result=\"" r "\"}" { print $2; f = 1 }
    END { if (!f) print 0 }'
}

# check_fs MNT BACKING REMOUNT: the tree copied in and compared (through the
# mount after REMOUNT, and on the server's disk), 2000 entries listed, and
# rename, link, symlink and setattr checked with stat on both sides.
check_fs() {
  local mnt=$1 back=$2 remount=$3
  rm -rf "$back/tree" "$back/many" "$back/a" "$back/b" "$back/c" "$back/d"  # what a failed cell left
  cp -a /tmp/src "$mnt/tree" || die "copy into $mnt failed"
  local ran worker
  ran=$(inline_changes ran) worker=$(inline_changes worker)
  mkdir "$mnt/many" && (cd "$mnt/many" && seq -f 'entry-%05g' 2000 | xargs touch) || die "2000 creates failed"
  if [ "$back" = /srv/ours ]; then
    # Each touch is a CREATE and a SETATTR of the times. An inline WRITE or
    # change that slept over 2 ms (a slowed guest) sends the changes of the
    # next second to workers, so this asserts only that they run inline.
    ran=$(($(inline_changes ran) - ran)) worker=$(($(inline_changes worker) - worker))
    [ "$ran" -ge 1000 ] || die "2000 creates: $ran changes ran on the server's receiving thread, $worker on workers"
    echo "figure: 2000 creates: $ran changes ran on the receiving thread, $worker on workers"
  fi
  echo hello >"$mnt/a" && mv "$mnt/a" "$mnt/b" && ln "$mnt/b" "$mnt/c" && ln -s b "$mnt/d" || die "rename/link/symlink"
  truncate -s 100 "$mnt/b" && chmod 0640 "$mnt/b" && chown 1234:5678 "$mnt/b" && touch -d @1700000000 "$mnt/b" ||
    die "setattr"
  $remount || die "remount failed"
  diff -r --no-dereference /tmp/src "$mnt/tree" || die "the tree read back differs"
  diff -r --no-dereference /tmp/src "$back/tree" || die "the tree on the server's disk differs"
  [ "$(ls "$mnt/many" | wc -l)" = 2000 ] || die "listing: $(ls "$mnt/many" | wc -l) of 2000 entries"
  diff <(ls -f "$mnt/many" | sort) <(ls -f "$back/many" | sort) || die "listing differs from the server's"
  local want="640 1234 5678 100 1700000000 2" f
  for f in "$mnt/b" "$back/b"; do
    [ "$(stat -c '%a %u %g %s %Y %h' "$f")" = "$want" ] || die "stat $f: $(stat -c '%a %u %g %s %Y %h' "$f"), want $want"
  done
  [ ! -e "$mnt/a" ] && [ "$(readlink "$mnt/d")" = b ] && [ "$(cat "$mnt/c" | wc -c)" = 100 ] || die "rename/link/symlink"
  echo "figure: $(du -sb --apparent-size /tmp/src | cut -f1) bytes in $(find /tmp/src | wc -l) entries copied and compared, 2000 listed"
  rm -rf "$mnt/tree" "$mnt/many" "$mnt/b" "$mnt/c" "$mnt/d"
}

kmount() { mount -t nfs -o "$2" "$SERVER_IP:$3" "$1"; }  # MNT OPTIONS EXPORT
kernel_to_ours() {  # proto
  local opts=$OURS_KOPT,proto=$1,port=$([ "$1" = rdma ] && echo $RPORT || echo $PORT)
  kmount /mnt/a "$opts" /srv/ours || return 1
  grep -q "/mnt/a nfs .*proto=$1" /proc/mounts || die "not mounted over $1"
  check_fs /mnt/a /srv/ours "eval umount /mnt/a && kmount /mnt/a $opts /srv/ours"
  local rc=$?
  umount /mnt/a
  return $rc
}

fuse_mount() { "$FUSE" -o "proto=rdma,provider=verbs,$2" "$SERVER_IP:$3" "$1"; }  # MNT OPTIONS EXPORT
fuse_to() {  # kernel|ours
  local opts=port=20049,mountport=20048 export=/srv/kernel
  [ "$1" = ours ] && opts=port=$RPORT,mountport=$MPORT export=/srv/ours
  fuse_mount /mnt/b "$opts" $export || return 1
  check_fs /mnt/b $export "eval umount /mnt/b && fuse_mount /mnt/b $opts $export"
  local rc=$?
  umount /mnt/b
  return $rc
}

engine_to() {  # kernel|ours: writes then reads back, 4 KiB to 1 MiB, verified
  local port=20049 mport=20048 export=/srv/kernel bs
  [ "$1" = ours ] && port=$RPORT mport=$MPORT export=/srv/ours
  cd /tmp || return 1
  for bs in 4k 64k 1M; do
    local args=(--ioengine="external:$ENGINE" --nfs_export="$SERVER_IP:$export" --nfs_transport=rdma --nfs_provider=verbs
      --nfs_port=$port --nfs_mount_port=$mport --filename_format="engine-$bs.\$jobnum" --bs=$bs --size=8M
      --iodepth=16 --verify=crc32c)
    fio --name=w "${args[@]}" --rw=randwrite --do_verify=1 || die "fio $bs write"
    fio --name=w "${args[@]}" --rw=read --verify_only || die "fio $bs read back"
    [ "$(stat -c %s "$export/engine-$bs.0")" = 8388608 ] ||
      die "engine-$bs: wrong size on the server"
  done
  echo "figure: 3 x 8 MiB written and read back with crc32c verify (4 KiB, 64 KiB, 1 MiB blocks, iodepth 16)"
  rm -f "$export"/engine-*
}

bench_tools() {  # fabric_bench (raw RMA) and nfs_bench (NFS through client/core) on verbs
  "$BUILD/bench/fabric_bench" --provider verbs --port 20070 >/dev/null 2>&1 &
  local fb=$! rc try
  # The server listens once its start-up is done (libinfinipath, loaded with
  # libfabric, calibrates for a while, longer under TCG): until then, refused.
  for try in $(seq 40); do
    timeout 120 "$BUILD/bench/fabric_bench" --provider verbs --peer "$SERVER_IP" --port 20070 --seconds 0.3 \
      --depth 8 --buffer-mib 16 >/tmp/fabric.txt 2>/tmp/fabric.err
    rc=$?
    { [ $rc = 0 ] || ! grep -q "Connection refused" /tmp/fabric.err; } && break
    sleep 0.25
  done
  cat /tmp/fabric.err >&2
  kill $fb; wait $fb 2>/dev/null
  cat /tmp/fabric.txt
  [ $rc = 0 ] && grep -q "RMA Read bandwidth" /tmp/fabric.txt || die "fabric_bench on verbs failed"
  echo "figure: fabric_bench $(grep -E 'RMA (Read|Write) bandwidth +1 MiB' /tmp/fabric.txt | tr -s ' ' | tr '\n' ';')"
  local op
  for op in write read null getattr access lookup; do
    timeout 120 "$BUILD/bench/nfs_bench" --server "$SERVER_IP:/srv/ours" --proto rdma --provider verbs --port $RPORT \
      --mount-port $MPORT --op $op --bs 256K --depth 8 --seconds 1 --region-mib 16 --zero-copy >/tmp/nfs_$op.txt ||
      die "nfs_bench $op on verbs failed: $(cat /tmp/nfs_$op.txt)"
    echo "figure: nfs_bench $op $(tail -1 /tmp/nfs_$op.txt | tr -s ' ')"
  done
  rm -f /srv/ours/nfs_bench.dat
  # Against the kernel's nfsd, whose FSINFO offers 512 KiB in this guest's memory, a 1 MiB block is refused clearly.
  timeout 60 "$BUILD/bench/nfs_bench" --server "$SERVER_IP:/srv/kernel" --proto rdma --provider verbs --port 20049 \
    --mount-port 20048 --op write --bs 1M --seconds 1 >/tmp/nfs_big.txt 2>&1
  [ $? = 2 ] && grep -q "FSINFO" /tmp/nfs_big.txt || die "nfs_bench at 1 MiB against the kernel: $(cat /tmp/nfs_big.txt)"
  cat /tmp/nfs_big.txt
  rm -f /srv/kernel/nfs_bench.dat
}

# 4 MiB transfers on verbs: a second server of ours offering 4 MiB READs and
# WRITEs, the fio engine's 4 MiB blocks (one call each) verified, and
# nfsrdma-fuse with rsize and wsize of 4 MiB copying a file in and out.
big_transfers() {
  mkdir -p /srv/ours/big4 && cd /tmp || return 1
  ("$SERVER" --provider verbs --port 2070 --mount-port 20078 --rdma-port 20079 --no-register --state-dir /tmp/state-4m \
    --rtmax 4194304 --wtmax 4194304 --export "/srv/ours/big4 *(rw,no_root_squash)" >>"$RESULTS/server-4m.log" 2>&1 &)
  answers 2070 || die "the 4 MiB server did not start"
  local args=(--ioengine="external:$ENGINE" --nfs_export="$SERVER_IP:/srv/ours/big4" --nfs_transport=rdma
    --nfs_provider=verbs --nfs_port=20079 --nfs_mount_port=20078 --filename=e4 --bs=4M --size=32M --iodepth=4
    --verify=crc32c)
  fio --name=w "${args[@]}" --rw=write --do_verify=1 || die "fio 4 MiB write"
  fio --name=w "${args[@]}" --rw=read --verify_only || die "fio 4 MiB read back"
  fuse_mount /mnt/b "port=20079,mountport=20078,rsize=4194304,wsize=4194304" /srv/ours/big4 || die "4 MiB mount"
  grep -q "mounted $SERVER_IP:/srv/ours/big4 (.*rsize=4194304,wsize=4194304" /var/log/nfsrdma-fuse.log ||
    die "the mount did not take 4 MiB"
  head -c 32M /tmp/big >/tmp/big32
  cp /tmp/big32 /mnt/b/big && umount /mnt/b && fuse_mount /mnt/b "port=20079,mountport=20078,rsize=4194304" /srv/ours/big4 ||
    die "copy through the 4 MiB mount"
  cmp /tmp/big32 /mnt/b/big && cmp /tmp/big32 /srv/ours/big4/big || die "the file differs after a 4 MiB copy"
  umount /mnt/b
  pkill -f "nfsrdma-server --provider verbs --port 2070"
  echo "figure: 32 MiB in 4 MiB fio blocks verified; 32 MiB copied through a 4 MiB mount and compared"
  rm -rf /srv/ours/big4
}

# Multi-rail on soft-RoCE: nfsrdma-fuse over two links (rxe1 -> rxe0 and
# rxe3 -> rxe2), the second cut for 4 s during a verified write; the calls
# per connection (the mount's metrics) and the packets each client device
# sent (rxe's counters) before, during and after. Then the fio engine over
# the same two links, verified, with both devices carrying it. The cut drops
# every packet both ways (netem), as a dead cable or switch port does: taking
# a veth down and up instead leaves 6.1's rxe unable to set up any new
# connection on that device for over a minute once a queue pair died with
# work in flight (perftest alone shows it), so the link could not come back.
rail_calls() { curl -sf http://127.0.0.1:9310/metrics |
  awk -v c="connection=\"$1\"" '$1 ~ /^nfsrdma_client_connection_calls_total\{/ && index($1, c) {print $2}'; }
retransmits() { curl -sf http://127.0.0.1:9310/metrics | awk '$1 == "nfsrdma_client_retransmits_total" {print $2}'; }
rail_up() { curl -sf http://127.0.0.1:9310/metrics |
  awk -v c="connection=\"$1\"" '$1 ~ /^nfsrdma_client_connection_up\{/ && index($1, c) {print $2}'; }
sent_pkts() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts"; }
multirail() {
  modprobe sch_netem || die "no netem"
  second_rail_up || die "no second link"
  rdma link show | grep -q "rxe3.*ACTIVE" || die "rxe3 is not active"
  # A server of its own: libfabric's verbs provider knows only the devices
  # present when its process started, and rxe2 is new.
  ("$SERVER" --provider verbs --port 2080 --mount-port 20088 --rdma-port 20089 --no-register --state-dir /tmp/state-mr \
    --export "/srv/ours *(rw,no_root_squash)" >>"$RESULTS/server-mr.log" 2>&1 &)
  answers 2080 || die "the multi-rail server did not start"
  local rails="remoteaddrs=$SERVER_IP~$SERVER_IP2,localaddrs=$CLIENT_IP~$CLIENT_IP2"
  fuse_mount /mnt/a "port=20089,mountport=20088,$rails,timeo=10,metrics=127.0.0.1:9310" /srv/ours || die "two-rail mount"
  # 192 MiB at 16 MiB/s (12 s), every block checked when read back.
  fio --name=rails --directory=/mnt/a --filename=rails --size=192M --bs=1M --rw=write --rate=16m \
    --verify=crc32c --verify_fatal=1 --do_verify=1 >"$RESULTS/multirail-fio.log" 2>&1 &
  local fio_pid=$! b0 b1 d0 d1 a0 a1 p1 p3 q1 q3 r0 r1
  sleep 2
  b0=$(rail_calls 0) b1=$(rail_calls 1) p1=$(sent_pkts rxe1) p3=$(sent_pkts rxe3) r0=$(retransmits)
  tc qdisc add dev v3 root netem loss 100% && tc qdisc add dev v2 root netem loss 100% || die "netem"
  sleep 4
  d0=$(rail_calls 0) d1=$(rail_calls 1) q1=$(sent_pkts rxe1) q3=$(sent_pkts rxe3) r1=$(retransmits)
  tc qdisc del dev v3 root && tc qdisc del dev v2 root || die "netem removal"
  local i
  for i in $(seq 150); do [ "$(rail_up 1)" = 1 ] && break; sleep 0.1; done
  [ "$(rail_up 1)" = 1 ] || { tail -20 /var/log/nfsrdma-fuse.log; die "the cut link did not come back within 15 s"; }
  sleep 2
  a0=$(rail_calls 0) a1=$(rail_calls 1)
  wait "$fio_pid" || { tail -20 "$RESULTS/multirail-fio.log"; die "the verified write failed across the link loss"; }
  grep -q "err= 0" "$RESULTS/multirail-fio.log" || die "fio reported errors"
  cmp /mnt/a/rails /srv/ours/rails || die "the file differs on the server"
  echo "figure: calls per link (rxe1, rxe3): before the cut $b0, $b1; while rxe3's link was cut +$((d0 - b0)), +$((d1 - b1)) ($((r1 - r0)) resent in all); after it came back +$((a0 - d0)), +$((a1 - d1))"
  echo "figure: packets sent while cut: rxe1 +$((q1 - p1)), rxe3 +$((q3 - p3))"
  grep "connection 10.99.1.2\|reconnected 10.99.1.2" /var/log/nfsrdma-fuse.log | tail -4
  [ "$b0" -gt 0 ] && [ "$b1" -gt 0 ] || die "both links did not carry calls before the cut"
  [ $((d0 - b0)) -gt 10 ] || die "rxe1 did not carry the calls while rxe3's link was cut"
  # New calls go to rxe3 until its link is found failing (timeo): a few more
  # on a guest slowed by a busy host (a CI run: 18, against 129 on rxe1).
  # A reconnection that comes through while the cut lasts resends the calls
  # still waiting there (a CI run: 26), which fail again a timeo later: the
  # calls counted on rxe3 less every resend are the new ones it was given.
  local fresh=$(((d1 - b1) - (r1 - r0)))
  [ "$fresh" -le 16 ] || [ $((4 * fresh)) -le $((d0 - b0)) ] ||
    die "rxe3 was given $fresh new calls while cut ($((d1 - b1)) with resends), rxe1 $((d0 - b0))"
  [ $((a0 - d0)) -gt 0 ] && [ $((a1 - d1)) -gt 0 ] || die "both links did not carry calls after rxe3 came back"
  umount /mnt/a
  rm -f /srv/ours/rails
  p1=$(sent_pkts rxe1) p3=$(sent_pkts rxe3)
  cd /tmp && fio --name=rails --ioengine="external:$ENGINE" --nfs_export="$SERVER_IP:/srv/ours" --nfs_provider=verbs \
    --nfs_port=20089 --nfs_mount_port=20088 --nfs_nconnect=2 --nfs_remoteaddrs="$SERVER_IP~$SERVER_IP2" \
    --nfs_localaddrs="$CLIENT_IP~$CLIENT_IP2" --filename=engine-rails --size=32M --bs=64k --iodepth=8 --rw=write \
    --verify=crc32c --verify_fatal=1 --do_verify=1 >"$RESULTS/multirail-engine.log" 2>&1 || die "the fio engine over two links"
  q1=$(sent_pkts rxe1) q3=$(sent_pkts rxe3)
  echo "figure: the fio engine over two links, 32 MiB verified: rxe1 sent $((q1 - p1)) packets, rxe3 $((q3 - p3))"
  [ $((q1 - p1)) -gt 1000 ] && [ $((q3 - p3)) -gt 1000 ] || die "the engine did not use both links"
  rm -f /srv/ours/engine-rails
  pkill -f "nfsrdma-server --provider verbs --port 2080"
  second_rail_down
}

# The project's RDMA gtest binary NAME on verbs: its RPC-RDMA cases only
# (a case run over both transports has a /tcp twin, which the host's
# `make test` runs as it would here: on an emulated guest it only costs time).
own_suite() {
  cd /tmp || return 1
  TMPDIR=/srv/scratch NFSRDMA_TEST_PROVIDER=verbs NFSRDMA_TEST_SERVER=$SERVER_IP NFSRDMA_TEST_CLIENT=$CLIENT_IP NFSRDMA_SERVER=$SERVER \
    "$BUILD/tests/$1_test" --gtest_brief=1 --gtest_filter='-*/tcp'
}

restart_mid_write() {  # a hard kernel mount over RDMA; the server SIGKILLed and restarted under a write
  kmount /mnt/a "$OURS_KOPT,proto=rdma,port=$RPORT,timeo=50" /srv/ours || return 1
  # O_DIRECT: each 1 MiB goes out as it is written, so the kill lands mid-stream.
  dd if=/tmp/big of=/mnt/a/big bs=1M oflag=direct conv=fsync status=none &
  local dd_pid=$! t0=$SECONDS i
  # Killed once a quarter of the file has reached the server's disk.
  for i in $(seq 300); do [ "$(stat -c %s /srv/ours/big 2>/dev/null || echo 0)" -ge $((16 << 20)) ] && break; sleep 0.1; done
  kill -0 $dd_pid 2>/dev/null || die "the write ended before the server was killed: make it larger"
  kill -9 "$(pgrep -f "nfsrdma-server --provider verbs --port $PORT")"
  sleep 0.2
  echo "figure: killed with $(du -B1 /srv/ours/big | cut -f1) bytes on the server's disk"
  sleep 2
  start_ours || return 1
  wait $dd_pid || die "dd failed across the restart"
  echo "figure: 64 MiB written in $((SECONDS - t0)) s across a SIGKILL and restart"
  umount /mnt/a && kmount /mnt/a "$OURS_KOPT,proto=rdma,port=$RPORT" /srv/ours || return 1
  cmp /tmp/big /mnt/a/big && cmp /tmp/big /srv/ours/big || die "the file differs after the restart"
  rm -f /mnt/a/big
  umount /mnt/a
}

# Network locks through the kernel client on a mount of ours over RDMA,
# without nolock. The kernel's lockd is this guest's only NLM client, and its
# rpcbind the only portmapper on 111, where the kernel nfsd's lockd is
# registered: a second instance of our server serves --portmap on 1111, and
# what the client sends to $SERVER_IP:111 is redirected there (nftables), so
# each side finds the other's NLM as two hosts would. The server is
# SIGKILLed and restarted with a lock held: its SM_NOTIFY reaches the guest's
# rpc.statd, and the kernel reclaims in the grace period.
LPORT=2060 LMPORT=20068 LRPORT=20069
locks_server() {
  ("$SERVER" --provider verbs --port $LPORT --mount-port $LMPORT --rdma-port $LRPORT --portmap --portmap-port 1111 \
    --nlm-port 4045 --grace 5 --state-dir /tmp/state-locks --export "/srv/ours *(rw,no_root_squash)" \
    >>"$RESULTS/locks-server.log" 2>&1 &)
  answers $LPORT || die "the lock server did not start"
}
lock_probe() {  # FILE START LEN: "free", or the holder's type, start and length, as F_GETLK says
  python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fl = struct.pack("hhqqi", fcntl.F_WRLCK, 0, int(sys.argv[2]), int(sys.argv[3]), 0)
t, _, start, length, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, fl))
print("free" if t == fcntl.F_UNLCK else "%s %d %d" % ("W" if t == fcntl.F_WRLCK else "R", start, length))' "$@"
}
kernel_locks_on_ours() {
  modprobe nft_chain_nat && modprobe nft_nat || return 1
  nft add table ip nfsrdma_locks && nft add chain ip nfsrdma_locks out '{ type nat hook output priority -100; }' &&
    nft add rule ip nfsrdma_locks out ip daddr "$SERVER_IP" tcp dport 111 dnat to "$SERVER_IP:1111" || return 1
  locks_server || return 1
  local opts="vers=3,hard,proto=rdma,port=$LRPORT,mountport=$LMPORT,mountproto=tcp" f=/mnt/a/locked t0
  kmount /mnt/a "$opts" /srv/ours || return 1
  echo data >"$f"
  # flock(1): refused while held, granted when the holder lets go.
  flock -x "$f" -c 'sleep 3' &
  sleep 1
  flock -n -x "$f" true && die "flock -n got a lock another process holds"
  t0=$(date +%s%N)
  timeout 25 flock -x "$f" true || die "a waiting flock was never granted"
  # The kernel asks again every 30 s: a grant within seconds came by GRANTED.
  echo "figure: a blocked flock was granted $((($(date +%s%N) - t0) / 1000000)) ms after it asked (the holder let go 2 s after)"
  wait
  # nfsrdma-fuse on the same server, another lock client: against the kernel's.
  fuse_mount /mnt/b "port=$LRPORT,mountport=$LMPORT" /srv/ours || return 1
  flock -x /mnt/b/locked -c 'sleep 2' &
  local fuse_holder=$!
  sleep 1
  flock -n -x "$f" true && die "the kernel client got a flock nfsrdma-fuse holds on our server"
  timeout 25 flock -x "$f" true || die "the kernel client never got the lock nfsrdma-fuse let go"
  wait "$fuse_holder"
  umount /mnt/b
  # fcntl ranges: two processes, and a process on the server.
  python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)
r, w = os.pipe()
if os.fork() == 0:
    fd2 = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 5); os._exit(1)
    except OSError: pass
    try:
        fcntl.lockf(fd2, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 10)
    except OSError as e:
        print("the second process could not take its read lock:", e, flush=True); os._exit(1)
    os.write(w, b"x"); time.sleep(10); os._exit(0)
os.close(w)
os.read(r, 1)
time.sleep(30)' "$f" &
  local holder=$!
  sleep 2
  [ "$(lock_probe "$f" 0 5)" = "W 0 10" ] || die "F_GETLK through the mount: $(lock_probe "$f" 0 5), want W 0 10"
  [ "$(lock_probe /srv/ours/locked 0 5)" = "W 0 10" ] ||
    die "F_GETLK on the server's disk: $(lock_probe /srv/ours/locked 0 5), want W 0 10"
  [ "$(lock_probe /srv/ours/locked 12 1)" = "R 10 10" ] ||
    die "the second process's read lock on the server: $(lock_probe /srv/ours/locked 12 1)"
  # Restart: killed, started again; the client reclaims its lock in the grace period.
  pkill -9 -f "nfsrdma-server --provider verbs --port $LPORT" && sleep 0.5
  [ "$(lock_probe /srv/ours/locked 0 5)" = free ] || die "a killed server's locks outlived it"
  locks_server || return 1
  local i
  for i in $(seq 40); do [ "$(lock_probe /srv/ours/locked 0 5)" = "W 0 10" ] && break; sleep 0.5; done
  [ "$(lock_probe /srv/ours/locked 0 5)" = "W 0 10" ] || die "the lock was not reclaimed after a restart: $(tail -5 "$RESULTS/locks-server.log")"
  echo "figure: the kernel client reclaimed its lock $((i / 2)) s after the server restarted"
  grep -q "told .* that this server restarted" "$RESULTS/locks-server.log" || die "no SM_NOTIFY reached the client"
  kill "$holder"; wait "$holder" 2>/dev/null
  sleep 1
  [ "$(lock_probe /srv/ours/locked 0 5)" = free ] || die "a lock outlived its holder: $(lock_probe /srv/ours/locked 0 5)"
  umount /mnt/a
  pkill -f "nfsrdma-server --provider verbs --port $LPORT"
  nft delete table ip nfsrdma_locks
}

# nfsrdma-fuse taking network locks on the kernel's nfsd (its lockd, found
# through the guest's rpcbind, and rpc.statd), against the kernel client on
# the same export (another lock client) and a process on the server.
fuse_locks_on_kernel() {
  fuse_mount /mnt/b port=20049,mountport=20048 /srv/kernel || return 1
  kmount /mnt/a "vers=3,hard,proto=rdma,port=20049,mountport=20048" /srv/kernel || return 1
  local f=locked t0
  echo data >/mnt/b/$f
  flock -x /mnt/b/$f -c 'sleep 3' &
  sleep 1
  flock -n -x /mnt/a/$f true && die "the kernel client got a flock nfsrdma-fuse holds"
  t0=$(date +%s%N)
  timeout 40 flock -x /mnt/a/$f true || die "the kernel client never got the lock nfsrdma-fuse let go"
  echo "figure: the kernel client's blocked flock was granted $((($(date +%s%N) - t0) / 1000000)) ms after it asked"
  wait
  # fcntl ranges through nfsrdma-fuse, seen by the kernel client and on the server.
  python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)
time.sleep(30)' /mnt/b/$f &
  local holder=$!
  sleep 2
  [ "$(lock_probe /mnt/a/$f 0 5)" = "W 0 10" ] || die "the kernel client's F_GETLK: $(lock_probe /mnt/a/$f 0 5)"
  [ "$(lock_probe /srv/kernel/$f 5 1)" = "W 0 10" ] || die "F_GETLK on the server: $(lock_probe /srv/kernel/$f 5 1)"
  [ "$(lock_probe /mnt/b/$f 10 10)" = free ] || die "beyond the range: $(lock_probe /mnt/b/$f 10 10)"
  t0=$(date +%s%N)
  python3 -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_SH, 5, 2)' /srv/kernel/$f &
  local local_waiter=$!
  sleep 1
  kill "$holder"; wait "$holder" 2>/dev/null
  wait "$local_waiter" || die "a process on the server never got the range nfsrdma-fuse let go"
  echo "figure: a process on the server waited $((($(date +%s%N) - t0) / 1000000)) ms for the range"
  umount /mnt/a
  umount /mnt/b
}

nconnect4() {
  local n i t0=$SECONDS
  kmount /mnt/a "$OURS_KOPT,proto=rdma,port=$RPORT,nconnect=4" /srv/ours || return 1
  local pids=()
  for i in 1 2 3 4 5 6 7 8; do
    timeout 120 dd if=/tmp/big of=/mnt/a/n$i bs=1M count=8 skip=$((i * 4)) status=none &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || die "a writer failed or hung"; done
  n=$(grep -c "xprt:.rdma" /proc/self/mountstats)
  echo "figure: $n RDMA connections for one nconnect=4 mount; 8 x 8 MiB in $((SECONDS - t0)) s"
  echo "figure: the kernel's transports: $(awk '/xprt:\trdma/ {print "connects=" $5 " sends=" $8 " recvs=" $9}' /proc/self/mountstats | tr '\n' ' ')"
  umount /mnt/a && kmount /mnt/a "$OURS_KOPT,proto=rdma,port=$RPORT" /srv/ours || return 1
  for i in 1 2 3 4 5 6 7 8; do
    dd if=/tmp/big of=/tmp/want bs=1M count=8 skip=$((i * 4)) status=none
    cmp /tmp/want /mnt/a/n$i || die "n$i differs"
  done
  rm -f /mnt/a/n*
  umount /mnt/a
  [ "$n" -ge 4 ] || die "the kernel opened $n connections, not 4"
}

# RoCEv2 crossing v0, decoded by tshark's InfiniBand -> RPC-over-RDMA -> NFS
# dissectors: our client and server, then the kernel's, doing the same things.
capture() {  # NAME: runs "traffic_NAME" under dumpcap into $RESULTS/NAME.pcapng
  local pcap=$RESULTS/$1.pcapng
  dumpcap -q -i v0 -f "udp port 4791" -w "$pcap" 2>/dev/null &
  local dp=$! i
  # Capturing once the file has its header.
  for i in $(seq 50); do [ -s "$pcap" ] && break; sleep 0.1; done
  "traffic_$1"
  local rc=$?
  sleep 1
  kill -INT $dp; wait $dp
  return $rc
}
traffic() {  # EXPORT MOUNT_OPTIONS NFS_PORT MOUNT_PORT: the kernel client, then the fio engine
  mkdir -p "$1/wide" && (cd "$1/wide" && seq -f 'a-rather-long-file-name-%05g' 400 | xargs touch)
  kmount /mnt/a "$2" "$1" || return 1
  ls /mnt/a/wide | wc -l >/dev/null
  head -c 262144 /tmp/big >/mnt/a/rw && sync && echo 3 >/proc/sys/vm/drop_caches && cmp <(head -c 262144 /tmp/big) /mnt/a/rw
  umount /mnt/a
  cd /tmp && fio --name=cap --ioengine="external:$ENGINE" --nfs_export="$SERVER_IP:$1" --nfs_transport=rdma \
    --nfs_provider=verbs --nfs_port="$3" --nfs_mount_port="$4" --filename_format='cap.$jobnum' --bs=128k --size=512k \
    --rw=write --verify=crc32c >/dev/null
}
traffic_ours() { traffic /srv/ours "$OURS_KOPT,proto=rdma,port=$RPORT" $RPORT $MPORT; }
traffic_kernel() { traffic /srv/kernel "$KOPT,proto=rdma,port=20049" 20049 20048; }
tshark_decodes() {
  capture ours || return 1
  capture kernel || return 1
  "$HERE/rpcrdma_decode.sh" "$RESULTS/ours.pcapng" "$RESULTS/kernel.pcapng"
}

# iWARP: the veth ends' devices become siw0 and siw1, and our server is
# started again on them (the kernel nfsd's RDMA listener, bound to no device,
# takes the new ones by itself). What iWARP changes is met by the cells that
# follow: connections set up by MPA over TCP, which carries the RFC 8797
# private data both ways; the sink of an RDMA Read registered for remote
# write; the kernel's server reading through registrations of its own (the
# rdma_rw MR path it takes only on iWARP), where on RoCE it reads into its
# pages directly.
iwarp_up() {
  pkill -f "nfsrdma-server --provider verbs --port $PORT"
  sleep 0.5
  rdma_devices siw || return 1
  rdma link show
  [ "$(cat /sys/class/infiniband/siw0/node_type)" = "4: RNIC" ] || die "siw0 is not an iWARP RNIC"
  grep -q "domain: siw0" <<<"$(fi_info -p verbs -t FI_EP_MSG)" || die "libfabric's verbs provider does not see siw0"
  start_ours || return 1
  # Under a small locked-memory limit a mount fails, and says which limit.
  local out
  out=$( (ulimit -l 1024; "$FUSE" -o "proto=rdma,provider=verbs,port=$RPORT,mountport=$MPORT,retry=0" \
    "$SERVER_IP:/srv/ours" /mnt/b) 2>&1) && die "a mount registered its buffers under a 1 MiB memlock limit"
  echo "$out"
  grep -q "locked-memory limit is 1024 KiB" <<<"$out" || die "the failure does not name the memlock limit"
}

if [ "${1:-}" = --cell ]; then
  shift
  trap leave_no_mounts EXIT
  "$@"
  exit
fi
# --only REGEX: only the cells whose names match (setup still runs).
only=
if [ "${1:-}" = --only ]; then only=$2; fi
if ! setup >"$RESULTS/setup.log" 2>&1; then
  echo "1..0 # SKIP the guest could not set up soft-RoCE and nfsd: $(tail -1 "$RESULTS/setup.log")"
  cat "$RESULTS/setup.log" | sed 's/^/# /'
  exit 0
fi
cell kernel_rdma_to_ours kernel_to_ours rdma
cell kernel_tcp_to_ours kernel_to_ours tcp
cell fuse_verbs_to_kernel fuse_to kernel
cell engine_verbs_to_kernel engine_to kernel
cell fuse_verbs_to_ours fuse_to ours
cell engine_verbs_to_ours engine_to ours
cell kernel_rdma_server_restart restart_mid_write
cell kernel_nconnect4_to_ours nconnect4
cell kernel_rdma_locks_on_ours kernel_locks_on_ours
cell fuse_verbs_locks_on_kernel fuse_locks_on_kernel
cell tshark_rpcrdma tshark_decodes
cell bench_tools_verbs bench_tools
cell verbs_4mib_transfers big_transfers
cell verbs_multirail multirail
for t in rdma client_core rdma_hostile rdma_client_hostile alloc; do cell "verbs_$t" own_suite $t; done
ulimit -l unlimited  # siw charges registrations to RLIMIT_MEMLOCK, root or not
cell iwarp_devices iwarp_up
cell iwarp_kernel_to_ours kernel_to_ours rdma
cell iwarp_fuse_to_kernel fuse_to kernel
cell iwarp_engine_to_ours engine_to ours
cell iwarp_server_restart restart_mid_write
cell iwarp_verbs_rdma own_suite rdma
echo "1..$n"
exit $((failed > 0))
