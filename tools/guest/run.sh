#!/usr/bin/env bash
# run.sh [--name NAME] [--timeout S] [--mem MiB] SCRIPT [ARGS...]
# Boots the soft-RoCE guest (Debian's 6.1 kernel under QEMU, TCG, no network
# device) and runs SCRIPT ARGS inside it as root, with this host's root
# read-only under a tmpfs overlay, so the project's build is used in place.
# SCRIPT's output comes back in BUILD/guest/runs/NAME/output.log (printed
# here too), the kernel's console in console.log; exits with SCRIPT's status,
# 124 if the guest ran out of time. Files the script writes to $RESULTS
# (exported to it) come back in the same directory.
set -euo pipefail
BUILD=$(realpath -m "${BUILD:-build}")
name=run timeout_s=600 mem=3072
while [ $# -gt 0 ]; do
  case $1 in
    --name) name=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: run.sh [--name NAME] [--timeout S] [--mem MiB] SCRIPT [ARGS...]" >&2; exit 2; }
script=$(realpath "$1"); shift
G=$("$(dirname "$0")/prepare.sh" "$BUILD")
ver=$(cat "$G/kernel/version")
RESULTS=$G/runs/$name
rm -rf "$RESULTS" && mkdir -p "$RESULTS"
{
  echo "export RESULTS=$RESULTS BUILD=$BUILD GUEST=$G PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  echo "export HOME=/root LANG=C.UTF-8"
  printf 'cd %q\n' "$PWD"
  printf 'exec bash %q' "$script"; printf ' %q' "$@"; echo
} >"$RESULTS/job.sh"
accel=tcg
# The plain qemu64 CPU model: under TCG, `-cpu max` ran the same cells
# 1.1-1.6x slower (not pinned down: every extension it offers is emulated,
# and libraries pick their widest code). NFSRDMA_GUEST_CPU names another.
# KVM only where a guest is known to boot under it (NFSRDMA_GUEST_KVM=1).
[ "${NFSRDMA_GUEST_KVM:-0}" = 1 ] && [ -w /dev/kvm ] && accel=kvm
set +e
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -accel "$accel" -m "$mem" -smp 2 -cpu "${NFSRDMA_GUEST_CPU:-qemu64}" \
  -nographic -no-reboot -nic none -monitor none -serial "file:$RESULTS/console.log" \
  -kernel "$G/kernel/boot/vmlinuz-$ver" -initrd "$G/initramfs.cpio.gz" \
  -append "console=ttyS0 panic=-1 quiet nfsrdma.results=$RESULTS nfsrdma.kernel=$G/kernel" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap" \
  -virtfs "local,path=$RESULTS,mount_tag=results,security_model=passthrough" </dev/null
qrc=$?
set -e
[ -f "$RESULTS/output.log" ] && tr -cd '\11\12\40-\176' <"$RESULTS/output.log"
if [ -f "$RESULTS/rc" ]; then exit "$(cat "$RESULTS/rc")"; fi
echo "guest: no exit status from the guest (qemu exit $qrc); the console's last lines:" >&2
# Printable characters only: the console's escape sequences break JUnit logs.
tail -20 "$RESULTS/console.log" 2>/dev/null | tr -cd '\11\12\40-\176' >&2 || true
[ "$qrc" = 124 ] && exit 124
exit 1
