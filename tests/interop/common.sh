# Shared by the interop tests: a temporary export, a server on free ports, and
# cleanup that always runs. Tests exit 0 (pass), 1 (fail) or 77 (skip, with why).
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${LOG:-}" ] && [ -f "$LOG" ] && { echo "--- server log"; tail -50 "$LOG"; }; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (the server uses file handles and per-call identities)"
: "${NFSRDMA_SERVER:?set NFSRDMA_SERVER to the nfsrdma-server binary}"

WORK=$(mktemp -d /tmp/nfsrdma-interop-XXXXXX)
LOG=$WORK/server.log
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# on_exit 'commands': run them, then cleanup, when the test ends, whatever they
# return (errexit is off there), keeping the test's own exit status.
on_exit() { trap "rc=\$?; set +e; $1; cleanup; exit \$rc" EXIT; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server EXPORT_LINE...
start_server() {
  NFS_PORT=$(free_port)
  MOUNT_PORT=$(free_port)
  RDMA_PORT=$(free_port)
  # RDMA=1: also serve RPC-RDMA (tcp provider) on RDMA_PORT.
  local args=()
  if [ "${RDMA:-0}" = 1 ]; then args+=(--rdma-port "$RDMA_PORT" --provider tcp); else args+=(--no-rdma); fi
  for e in "$@"; do args+=(--export "$e"); done
  SERVER_ARGS=(--port "$NFS_PORT" --mount-port "$MOUNT_PORT" --bind "${BIND:-127.0.0.1}" --no-register
               --state-dir "$WORK/state" "${args[@]}" ${SERVER_EXTRA:-})
  launch_server
}

# The server again, on the same ports and state (a restart), after start_server.
launch_server() {
  "$NFSRDMA_SERVER" "${SERVER_ARGS[@]}" >>"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/${BIND:-127.0.0.1}/$NFS_PORT") 2>/dev/null; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited at start"
    sleep 0.05
  done
  fail "server did not start"
}

# url PATH: a libnfs URL for PATH on our server (no portmapper needed)
url() { echo "nfs://127.0.0.1$1?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"; }
