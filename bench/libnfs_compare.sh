#!/usr/bin/env bash
# nfs-cp (libnfs) bandwidth through nfsrdma-server and through nfs-ganesha on
# the same host, in the same run, over the same filesystem: SIZE_MIB each way,
# REPEATS times, medians and the ratio. Runs in a private network namespace
# (ganesha needs rpcbind on port 111). Needs root, nfs-ganesha-vfs, rpcbind.
#   bench/libnfs_compare.sh [build-dir]     SIZE_MIB=1024 REPEATS=3 by default
set -euo pipefail
BUILD=${1:-build}
SERVER=$(realpath "$BUILD/server/nfsrdma-server")
SIZE_MIB=${SIZE_MIB:-1024}
REPEATS=${REPEATS:-3}
for t in ganesha.nfsd rpcbind nfs-cp ip; do command -v $t >/dev/null || { echo "missing: $t"; exit 1; }; done
NS=nfsrdma-bench-$$
WORK=$(mktemp -d /var/tmp/nfsrdma-bench-XXXXXX)
. "$(dirname "$0")/../tools/ganesha-netns.sh"
trap 'ganesha_netns_stop "$NS"; rm -rf "$WORK"' EXIT
in_ns() { ip netns exec "$NS" "$@"; }
mkdir -p "$WORK/ours" "$WORK/ganesha"
ganesha_netns_start "$NS" "$WORK/ganesha" "$WORK" || { echo "nfs-ganesha did not start"; exit 1; }
GANESHA=$GANESHA_PID
ip netns exec "$NS" "$SERVER" --export "$WORK/ours 127.0.0.1(rw,no_root_squash)" --port 12049 --mount-port 12048 --no-register \
  --state-dir "$WORK/state" --log-level warn --no-rdma &
OURS=$!
for _ in $(seq 200); do in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/12049" 2>/dev/null && break; sleep 0.05; done
sleep 1
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/src"

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
now() { date +%s.%N; }
# measure NAME PID URL-QUERY: one write and one read; appends "MiB/s CPU-s/GiB" lines
measure() {
  # A new name each time: ganesha caches metadata and must not see files vanish behind it.
  local name=$1 pid=$2 url="nfs://127.0.0.1$WORK/$1/file-$RANDOM$3" t0 t1 c0 c1
  c0=$(cpu_s "$pid"); t0=$(now)
  in_ns nfs-cp "$WORK/src" "$url" >/dev/null
  t1=$(now); c1=$(cpu_s "$pid")
  echo "$(echo "$SIZE_MIB / ($t1 - $t0)" | bc -l) $(echo "($c1 - $c0) * 1024 / $SIZE_MIB" | bc -l)" >>"$WORK/$name.write"
  rm -f "$WORK/back"
  c0=$(cpu_s "$pid"); t0=$(now)
  in_ns nfs-cp "$url" "$WORK/back" >/dev/null
  t1=$(now); c1=$(cpu_s "$pid")
  echo "$(echo "$SIZE_MIB / ($t1 - $t0)" | bc -l) $(echo "($c1 - $c0) * 1024 / $SIZE_MIB" | bc -l)" >>"$WORK/$name.read"
  cmp -s "$WORK/src" "$WORK/back" || { echo "$name: data read back differs"; exit 1; }
}
for r in $(seq "$REPEATS"); do
  # Alternate the order so neither server always runs on a warmer machine.
  if ((r % 2)); then
    measure ours "$OURS" "?nfsport=12049&mountport=12048&version=3"
    measure ganesha "$GANESHA" "?version=3"
  else
    measure ganesha "$GANESHA" "?version=3"
    measure ours "$OURS" "?nfsport=12049&mountport=12048&version=3"
  fi
done
median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.0f", m}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
cpu_med() { awk '{print $2}' | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }
printf '\nnfs-cp, %d MiB each way, %d repeats, medians (min-max)\n' "$SIZE_MIB" "$REPEATS"
printf '%-18s %-10s %14s %12s %18s\n' server direction "MiB/s" range "server CPU s/GiB"
for name in ours ganesha; do
  for dir in write read; do
    label=$([ $name = ours ] && echo nfsrdma-server || echo nfs-ganesha)
    printf '%-18s %-10s %14s %12s %18s\n' "$label" "$dir" "$(awk '{print $1}' "$WORK/$name.$dir" | median)" \
      "$(awk '{print $1}' "$WORK/$name.$dir" | spread)" "$(cpu_med <"$WORK/$name.$dir")"
  done
done
for dir in write read; do
  o=$(awk '{print $1}' "$WORK/ours.$dir" | median); g=$(awk '{print $1}' "$WORK/ganesha.$dir" | median)
  printf 'ratio nfsrdma-server / nfs-ganesha, %s: %.2f\n' "$dir" "$(echo "$o / $g" | bc -l)"
done
