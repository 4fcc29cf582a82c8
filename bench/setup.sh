# Shared by the same-run comparison scripts: as root, a scratch export served
# by nfsrdma-server (TCP and RPC-RDMA on free ports) and a fabric_bench server,
# all stopped on exit. Needs BUILD and PROVIDER; sets WORK, NFS, MNT, RDMA,
# FAB, SERVER, and server_cpu (the server's CPU seconds so far).
[ "$(id -u)" = 0 ] || { echo "$(basename "$0"): needs root (nfsrdma-server)"; exit 1; }
WORK=$(mktemp -d /var/tmp/nfsrdma-bench-XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NFS=$(port); MNT=$(port); RDMA=$(port); FAB=$(port)
mkdir -p "$WORK/export"
"$BUILD/server/nfsrdma-server" --export "$WORK/export 127.0.0.1(rw,no_root_squash,async)" --bind 127.0.0.1 \
  --port "$NFS" --mount-port "$MNT" --rdma-port "$RDMA" --provider "$PROVIDER" --no-register \
  --state-dir "$WORK/state" --log-level warn &
SERVER=$!; PIDS+=("$SERVER")
"$BUILD/bench/fabric_bench" --provider "$PROVIDER" --port "$FAB" >/dev/null &
PIDS+=("$!")
for p in "$NFS" "$FAB"; do for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.05; done; done
sleep 0.3
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$SERVER/stat"; }
