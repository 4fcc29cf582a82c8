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
