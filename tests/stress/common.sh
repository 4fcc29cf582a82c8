# Shared by the fault and load tests: short versions in `make test`, long ones
# (STRESS=1) in `make stress`. Builds on the interop helpers.
. "$(dirname "${BASH_SOURCE[0]}")/../interop/common.sh"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
STRESS=${STRESS:-0}
long() { [ "$STRESS" = 1 ] && echo "$2" || echo "$1"; }   # long SHORT LONG
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
threads() { ls "/proc/$1/task" | wc -l; }
metric() { curl -sf "http://$1/metrics" | awk -v k="$2" '$1 == k {print $2}'; }
fuse_pid() { pgrep -f "nfsrdma-fuse .* $1( |$)" | head -1; }
# good_job NAME TRANSPORT SIZE SECONDS: fio arguments for one well-behaved job
# of the fio engine (random 64 KiB writes at depth 4, every block read back and
# crc32c-verified), appended to the array GOOD_ARGS.
good_job() {
  local port
  port=$([ "$2" = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  GOOD_ARGS+=(--name="$1" --ioengine="external:$FIO_ENGINE" --nfs_export="127.0.0.1:$EXPORT" --nfs_transport="$2"
              --nfs_port="$port" --nfs_mount_port="$MOUNT_PORT" --nfs_provider=tcp --filename="$1" --size="$3"
              --rw=randwrite --bs=64k --iodepth=4 --verify=crc32c --verify_backlog=64 --verify_fatal=1
              --time_based --runtime="$4")
}
