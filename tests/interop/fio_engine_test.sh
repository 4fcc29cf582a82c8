#!/usr/bin/env bash
# fio --ioengine=nfsrdma against a local nfsrdma-server, over RPC-RDMA (tcp
# provider) and TCP: sequential and random writes and reads, 4 KiB and 1 MiB,
# iodepth 1 and 32, two jobs each, verified with crc32c; a corrupted file must
# fail verification; and the engine loads by bare name once installed where the
# dynamic loader finds it.
RDMA=1
. "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "fio is not installed"
[ -f "${FIO_ENGINE:-}" ] || skip "the fio engine was not built (configure with -Dfio_src, as make build does)"

EXPORT=$WORK/export
mkdir -p "$EXPORT"
start_server "$EXPORT 127.0.0.1(rw,no_root_squash)"
# Files are named "<files>.<job>.<file>" at the export root: fio checks a
# `directory=` on the local filesystem, which a remote export is not.
run_fio() {  # name transport extra-args...   (FILES=prefix to use another job's files)
  local name=$1 transport=$2; shift 2
  local files=${FILES:-$name}
  local port=$([ "$transport" = rdma ] && echo "$RDMA_PORT" || echo "$NFS_PORT")
  fio --name="$name" --ioengine="external:$FIO_ENGINE" --nfs_export="127.0.0.1:$EXPORT" --nfs_transport="$transport" \
    --nfs_port="$port" --nfs_mount_port="$MOUNT_PORT" --nfs_provider=tcp --filename_format="$files.\$jobnum.\$filenum" \
    --size=4M \
    --output-format=terse --terse-version=3 "$@" >"$WORK/$name.out" 2>&1
}
cases=0
for transport in rdma tcp; do
  for rw in write randwrite; do
    for bs in 4k 1M; do
      for depth in 1 32; do
        name=$transport-$rw-$bs-$depth
        run_fio "$name" "$transport" --rw="$rw" --bs="$bs" --iodepth="$depth" --numjobs=2 --verify=crc32c \
          --do_verify=1 || { cat "$WORK/$name.out"; fail "$name"; }
        # Read it all back again as a separate, read-only workload.
        run_fio "$name" "$transport" --rw="$rw" --bs="$bs" --iodepth="$depth" --numjobs=2 --verify=crc32c \
          --verify_only || { cat "$WORK/$name.out"; fail "$name (verify_only)"; }
        cases=$((cases + 2))
      done
    done
  done
  # Jobs as threads this time (the others are processes).
  FILES=$transport-write-1M-32 run_fio "$transport-randread" "$transport" --rw=randread --bs=4k --iodepth=32 --thread \
    --numjobs=2 ||
    { cat "$WORK/$transport-randread.out"; fail "$transport randread"; }
  # Two connections per job, calls spread over them, and an fsync at the end.
  run_fio "$transport-nconnect" "$transport" --rw=randwrite --bs=16k --iodepth=16 --nfs_nconnect=2 --end_fsync=1 \
    --verify=crc32c --do_verify=1 || { cat "$WORK/$transport-nconnect.out"; fail "$transport nconnect"; }
  cases=$((cases + 2))
done
echo "ok: $cases fio runs over rdma and tcp, every verification passed"

# A corrupted file must fail verification.
run_fio corrupt rdma --rw=write --bs=64k --verify=crc32c --do_verify=0 || fail "corrupt: write"
f=$EXPORT/corrupt.0.0
printf 'garbage!' | dd of="$f" bs=1 seek=70000 conv=notrunc status=none
if run_fio corrupt rdma --rw=write --bs=64k --verify=crc32c --verify_only; then
  fail "verification passed on a corrupted file"
fi
grep -qiE 'verify|crc32c' "$WORK/corrupt.out" || { cat "$WORK/corrupt.out"; fail "no verify error reported"; }
echo "ok: a corrupted file fails verification"

# Bare name: installed where the loader looks (here a private directory on LD_LIBRARY_PATH).
mkdir -p "$WORK/lib"
install -m 0755 "$FIO_ENGINE" "$WORK/lib/nfsrdma"
grep -q nfs_export <<<"$(LD_LIBRARY_PATH="$WORK/lib" fio --enghelp=nfsrdma)" || fail "--enghelp=nfsrdma lists no options"
LD_LIBRARY_PATH="$WORK/lib" fio --name=bare --ioengine=nfsrdma --nfs_export="127.0.0.1:$EXPORT" --nfs_port="$RDMA_PORT" \
  --nfs_mount_port="$MOUNT_PORT" --nfs_provider=tcp --filename=bare.dat --size=2M --bs=128k --rw=write \
  --verify=crc32c >"$WORK/bare.out" 2>&1 || { cat "$WORK/bare.out"; fail "bare-name run"; }
echo "ok: --ioengine=nfsrdma by bare name, and --enghelp"

# unlink=1 removes the job's files from the export afterwards.
run_fio gone tcp --rw=write --bs=64k --unlink=1 || fail "unlink job"
[ ! -e "$EXPORT/gone.0.0" ] || fail "unlink=1 left the file on the export"
echo "ok: unlink=1 honoured"

# The engine preset of the comparison harness, briefly: every job with its
# transport baseline.
python3 "$TESTS_DIR/../bench/compare/run.py" --preset engine --seconds 0.5 --build "$(dirname "$FIO_ENGINE")/.." \
  --out "$WORK/compare" >"$WORK/compare.out" 2>&1 || { tail -30 "$WORK/compare.out"; fail "run.py --preset engine"; }
python3 - "$WORK/compare/results.json" <<'PY' || { cat "$WORK/compare.out"; fail "run.py --preset engine: cells"; }
import json, sys
cells = [c for c in json.load(open(sys.argv[1]))["cells"] if c["path"] == "engine"]
assert len(cells) == 10, len(cells)
assert all(c["iops"]["median"] > 0 and c["transport_limit"]["ratio"] > 0 for c in cells), cells
PY
echo "ok: bench/compare/run.py --preset engine"

# A refused export fails the job with a clear message.
if run_fio refused rdma --rw=write --bs=4k --nfs_export="127.0.0.1:/not/exported"; then fail "refused export ran"; fi
grep -q "no such export" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "unclear refusal"; }
echo "ok: a refused export fails the job with a clear message"

# An IPv6 server, named as nfsrdma-fuse names it: [address]:/export.
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
BIND=::1 start_server "$EXPORT ::1(rw,no_root_squash)"
for transport in rdma tcp; do
  run_fio "v6-$transport" "$transport" --nfs_export="[::1]:$EXPORT" --rw=write --bs=64k --verify=crc32c ||
    { cat "$WORK/v6-$transport.out"; fail "[::1]:/export over $transport"; }
done
echo "ok: [::1]:/export over rdma and tcp"
