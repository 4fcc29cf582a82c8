#!/usr/bin/env bash
# A soak against one server through an RPC-RDMA mount: 16 fio jobs of random
# writes with interleaved crc32c verification, plus a metadata workload
# (create, stat, rename, list, unlink), for 90 s (make test) or 10 minutes
# (make stress). Zero errors; server and client resident memory at the end
# within 10% of what it was after the first minute (allocator arenas and the
# duplicate request cache fill during that minute); descriptors stable.
. "$(dirname "$0")/common.sh"
[ -w /dev/fuse ] || skip "no /dev/fuse"
command -v fio >/dev/null || skip "fio is not installed"
SECS=$(long 90 600)
EXPORT=$WORK/export MNT=$WORK/mnt
mkdir -p "$EXPORT" "$MNT"
RDMA=1 start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
"$NFSRDMA_FUSE" "127.0.0.1:$EXPORT" "$MNT" -o "proto=rdma,provider=tcp,port=$RDMA_PORT,mountport=$MOUNT_PORT" ||
  fail "mount"
FUSE=$(fuse_pid "$MNT")
[ -n "$FUSE" ] || fail "no nfsrdma-fuse process for $MNT"
mkdir "$MNT/meta"
( end=$((SECONDS + SECS)); i=0
  while [ $SECONDS -lt $end ]; do
    d="$MNT/meta/d$((i % 8))"; mkdir -p "$d"
    echo "$i" >"$d/f$i" && stat "$d/f$i" >/dev/null && mv "$d/f$i" "$d/g$i" && ls "$d" >/dev/null &&
      [ "$(cat "$d/g$i")" = "$i" ] && rm "$d/g$i" || { echo "metadata op $i failed" >"$WORK/meta.err"; exit 1; }
    i=$((i + 1))
  done; echo "$i" >"$WORK/meta.count" ) &
meta=$!
fio --name=soak --directory="$MNT" --numjobs=16 --size=16M --bs=4k-256k --rw=randwrite --ioengine=psync \
  --verify=crc32c --verify_backlog=32 --verify_fatal=1 --time_based --runtime="$SECS" --group_reporting \
  --output-format=json >"$WORK/fio.json" 2>"$WORK/fio.err" &
fio=$!
sleep 60
s0=$(rss_kib "$SERVER_PID") c0=$(rss_kib "$FUSE") sf0=$(fds "$SERVER_PID") cf0=$(fds "$FUSE") ct0=$(threads "$FUSE")
wait "$fio" || { tail -20 "$WORK/fio.err"; fail "fio reported an error (verification included)"; }
wait "$meta" || fail "$(cat "$WORK/meta.err" 2>/dev/null || echo "the metadata workload failed")"
s1=$(rss_kib "$SERVER_PID") c1=$(rss_kib "$FUSE") sf1=$(fds "$SERVER_PID") cf1=$(fds "$FUSE") ct1=$(threads "$FUSE")
python3 - "$WORK/fio.json" <<'PY' || fail "fio errors"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
assert j["error"] == 0, j["error"]
print(f"fio: {j['write']['io_bytes'] >> 20} MiB written, {j['read']['io_bytes'] >> 20} MiB read back and verified")
PY
within() { [ "$2" -le $(($1 * 11 / 10 + 4096)) ]; }  # 10%, and 4 MiB for allocator noise on small figures
within "$s0" "$s1" || fail "server RSS grew from $s0 to $s1 KiB"
within "$c0" "$c1" || fail "client RSS grew from $c0 to $c1 KiB"
# A FUSE worker started late (at most 32 in all) brings its splice pipe: two descriptors.
[ $((sf1 - sf0)) -le 4 ] && [ $((cf1 - cf0)) -le $((4 + 2 * (ct1 - ct0))) ] ||
  fail "descriptors grew: server $sf0 -> $sf1, client $cf0 -> $cf1 (threads $ct0 -> $ct1)"
echo "ok: ${SECS} s soak, $(cat "$WORK/meta.count") metadata rounds; RSS server $s0 -> $s1 KiB, client $c0 -> $c1 KiB;" \
  "fds server $sf0 -> $sf1, client $cf0 -> $cf1 (threads $ct0 -> $ct1)"
