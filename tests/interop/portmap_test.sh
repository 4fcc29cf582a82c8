#!/usr/bin/env bash
# Port 111 in a private network namespace: our --portmap service answers libnfs's
# own portmapper lookup, and with Debian's rpcbind running instead the server
# registers NFS and MOUNT there and removes them when it stops.
. "$(dirname "$0")/common.sh"
command -v nfs-cat >/dev/null || skip "libnfs-utils is not installed"
command -v ip >/dev/null || skip "iproute2 is not installed"
NS=nfsrdma-pm-$$
ip netns add "$NS" 2>/dev/null || skip "cannot create a network namespace"
on_exit 'ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null; sleep 0.2; ip netns del "$NS"'
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up

EXPORT=$WORK/export
mkdir -p "$EXPORT"
echo "found through port 111" >"$EXPORT/file"
wait_port() { for _ in $(seq 100); do in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# 1. Our own PORTMAP service.
# `ip netns exec` execs the server, so $! is the server itself. (Never pkill by
# name: the PID namespace is the host's, and other servers may be running.)
ip netns exec "$NS" "$NFSRDMA_SERVER" --export "$EXPORT 127.0.0.1(rw,no_root_squash)" --portmap --no-rdma \
  --state-dir "$WORK/state" >"$LOG" 2>&1 &
pm_server=$!
wait_port 111 || fail "--portmap did not listen on 111"
[ "$(in_ns nfs-cat "nfs://127.0.0.1$EXPORT/file")" = "found through port 111" ] || fail "libnfs through our portmapper"
kill -TERM "$pm_server"; wait "$pm_server" 2>/dev/null || true
echo "ok: --portmap serves libnfs's GETPORT"

# 2. Registration with Debian's rpcbind.
command -v rpcbind >/dev/null || skip "rpcbind is not installed (step 1 passed)"
in_ns rpcbind -w -f &
wait_port 111 || fail "rpcbind did not start"
ip netns exec "$NS" "$NFSRDMA_SERVER" --export "$EXPORT 127.0.0.1(rw,no_root_squash)" --no-rdma \
  --state-dir "$WORK/state" >"$LOG" 2>&1 &
rb_server=$!
for _ in $(seq 100); do grep -q "registered with rpcbind" "$LOG" && break; sleep 0.05; done
grep -q "registered with rpcbind" "$LOG" || fail "server did not register with rpcbind"
in_ns rpcinfo -p 127.0.0.1 >"$WORK/rpcinfo"
grep -qE '100003 +3 +tcp +2049' "$WORK/rpcinfo" || { cat "$WORK/rpcinfo"; fail "NFS not registered"; }
grep -qE '100005 +3 +tcp +20048' "$WORK/rpcinfo" || { cat "$WORK/rpcinfo"; fail "MOUNT not registered"; }
[ "$(in_ns nfs-cat "nfs://127.0.0.1$EXPORT/file")" = "found through port 111" ] || fail "libnfs through rpcbind"
kill -TERM "$rb_server"; wait "$rb_server" 2>/dev/null || true
grep -qE '100003 ' <<<"$(in_ns rpcinfo -p 127.0.0.1)" && fail "NFS still registered after the server stopped"
echo "ok: registered with rpcbind, and unregistered on SIGTERM"
