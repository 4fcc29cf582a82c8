# Shared by the interop tests: a temporary export, a server on free ports, and
# cleanup that always runs. Tests exit 0 (pass), 1 (fail) or 77 (skip, with why).
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${LOG:-}" ] && [ -f "$LOG" ] && { echo "--- server log"; tail -50 "$LOG"; }; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (the server uses file handles and per-call identities)"
: "${NFSRDMA_SERVER:?set NFSRDMA_SERVER to the nfsrdma-server binary}"

# Binaries by absolute path: the test runs from $WORK.
NFSRDMA_SERVER=$(realpath -m "$NFSRDMA_SERVER")
[ -n "${NFSRDMA_FUSE:-}" ] && NFSRDMA_FUSE=$(realpath -m "$NFSRDMA_FUSE")
[ -n "${FIO_ENGINE:-}" ] && FIO_ENGINE=$(realpath -m "$FIO_ENGINE")
WORK=$(mktemp -d /tmp/nfsrdma-interop-XXXXXX)
TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$WORK"   # whatever a tool leaves behind (fio's verify state) goes with $WORK
LOG=$WORK/server.log
SERVER_PID=
cleanup() {
  # Whatever is still mounted under $WORK goes first, lazily; that includes a
  # mount whose client died (stat fails there, so mountpoint(1) cannot tell).
  awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# on_exit 'commands': run them, then cleanup, when the test ends, whatever they
# return (errexit is off there), keeping the test's own exit status. Each
# call adds to what runs, the latest first (a mount in a namespace goes
# before the namespace).
EXIT_HOOKS=""
on_exit() {
  EXIT_HOOKS="$1"$'\n'"$EXIT_HOOKS"
  trap "rc=\$?; set +e"$'\n'"$EXIT_HOOKS"$'\n'"cleanup; exit \$rc" EXIT
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server EXPORT_LINE...
start_server() {
  # Another process may take a port between free_port and the server's bind:
  # new ports then, three tries at most.
  for attempt in 1 2 3; do
    NFS_PORT=$(free_port)
    MOUNT_PORT=$(free_port)
    RDMA_PORT=$(free_port)
    # RDMA=1: also serve RPC-RDMA (tcp provider) on RDMA_PORT.
    local args=()
    if [ "${RDMA:-0}" = 1 ]; then args+=(--rdma-port "$RDMA_PORT" --provider tcp); else args+=(--no-rdma); fi
    for e in "$@"; do args+=(--export "$e"); done
    SERVER_ARGS=(--port "$NFS_PORT" --mount-port "$MOUNT_PORT" --bind "${BIND:-127.0.0.1}" --no-register
                 --state-dir "$WORK/state" "${args[@]}" ${SERVER_EXTRA:-})
    try_launch && return 0
    grep -q "Address already in use" <<<"$(since_launch)" && [ "$attempt" -lt 3 ] || fail "server exited at start"
  done
}

# The server again, on the same ports and state (a restart), after start_server.
launch_server() { try_launch || fail "server exited at start"; }

# Starts the server with SERVER_ARGS and waits until it says it listens (a
# port that answers could be someone else's): 0 then, 1 when it exited; fails
# the test if it does neither.
try_launch() {
  LAUNCH_LINE=$(( $(cat "$LOG" 2>/dev/null | wc -l) + 1 ))
  "$NFSRDMA_SERVER" "${SERVER_ARGS[@]}" >>"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 200); do
    if grep -q "listening: NFSv3 on tcp port $NFS_PORT" <<<"$(since_launch)"; then return 0; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then SERVER_PID=; return 1; fi
    sleep 0.05
  done
  fail "server did not start"
}
since_launch() { tail -n +"$LAUNCH_LINE" "$LOG"; }

# veth_netns TAG OCTET: a network namespace joined to this host by a veth pair
# on 10.OCTET.N.0/24 (N from the PID), the host at $NET.1 and the namespace at
# $NET.2; sets NS and NET, and removes it all when the test ends.
veth_netns() {
  NS=nfsrdma-$1-$$ NET=10.$2.$(( $$ % 250 + 1 ))
  local host_if=n$1$$h peer_if=n$1$$p
  on_exit "ip netns pids $NS 2>/dev/null | xargs -r kill -9; ip netns del $NS; ip link del $host_if 2>/dev/null"
  VETH_HOST_IF=$host_if
  ip netns add "$NS"
  ip link add "$host_if" type veth peer name "$peer_if"
  ip link set "$peer_if" netns "$NS"
  ip addr add "$NET.1/24" dev "$host_if" && ip link set "$host_if" up
  ip netns exec "$NS" ip addr add "$NET.2/24" dev "$peer_if"
  ip netns exec "$NS" ip link set "$peer_if" up
  ip netns exec "$NS" ip link set lo up
}

# url PATH: a libnfs URL for PATH on our server (no portmapper needed)
url() { echo "nfs://127.0.0.1$1?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"; }
