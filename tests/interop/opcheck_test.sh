#!/usr/bin/env bash
# The random-operation checker (tests/opcheck/opcheck.py) on an nfsrdma-fuse
# mount over rdma (tcp provider) and over tcp: seeded writes, truncates,
# reads, mmap reads and writes, fsyncs and reopens, compared after every step
# with a copy on local disk. OPCHECK_SEEDS seeds from OPCHECK_FIRST_SEED,
# OPCHECK_OPS operations each: by default 4 seeds from 1 of 400 operations;
# under make stress (STRESS=1) 40 seeds from the clock of 2,000.
. "$(dirname "$0")/common.sh"
: "${NFSRDMA_FUSE:?set NFSRDMA_FUSE to the nfsrdma-fuse binary}"
[ -w /dev/fuse ] || skip "no /dev/fuse"
if [ "${STRESS:-0}" = 1 ]; then
  SEEDS=${OPCHECK_SEEDS:-40} OPS=${OPCHECK_OPS:-2000} FIRST=${OPCHECK_FIRST_SEED:-$(date +%s)}
else
  SEEDS=${OPCHECK_SEEDS:-4} OPS=${OPCHECK_OPS:-400} FIRST=${OPCHECK_FIRST_SEED:-1}
fi
EXPORT=$WORK/export REF=$WORK/reference
mkdir -p "$EXPORT" "$REF" "$WORK/rdma" "$WORK/tcp"
RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
on_exit 'umount -l "$WORK/rdma" "$WORK/tcp" 2>/dev/null'
"$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$WORK/rdma" -o "proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT" ||
  fail "no rdma mount"
"$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$WORK/tcp" -o "proto=tcp,port=$NFS_PORT,mountport=$MOUNT_PORT" || fail "no tcp mount"
echo "seeds $FIRST..$((FIRST + SEEDS - 1)), $OPS operations each (OPCHECK_FIRST_SEED=$FIRST repeats them)"
for t in rdma tcp; do
  for seed in $(seq "$FIRST" $((FIRST + SEEDS - 1))); do
    python3 "$TESTS_DIR/opcheck/opcheck.py" --dir "$WORK/$t" --reference "$REF" --seed "$seed" --ops "$OPS" ||
      fail "over $t: the file differed from its reference (seed $seed)"
  done
  echo "ok: $SEEDS seeds over $t"
done
