# Sourced: nfs-ganesha (VFS FSAL, NFSv3 over TCP, no_root_squash) with rpcbind
# in a private network namespace, since ganesha wants rpcbind on port 111.
#   ganesha_netns_start NS EXPORT_DIR WORK_DIR   sets NS_PIDS; waits for 2049
#   ganesha_netns_stop NS                        kills what runs in NS, removes it
# Daemons start with `ip netns exec` directly so $! is their own pid (ip execs them).
ganesha_netns_start() {
  local ns=$1 dir=$2 work=$3
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  cat >"$work/ganesha.conf" <<CONF
NFS_CORE_PARAM { NFS_Port = 2049; MNT_Port = 20048; Protocols = 3; Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false; }
NFSV4 { Graceless = true; }
EXPORT { Export_Id = 1; Path = $dir; Pseudo = $dir; Access_Type = RW; Squash = No_Root_Squash;
         Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
CONF
  ip netns exec "$ns" rpcbind -w -f &
  sleep 0.5
  ip netns exec "$ns" ganesha.nfsd -F -L "$work/ganesha.log" -f "$work/ganesha.conf" -p "$work/ganesha.pid" &
  GANESHA_PID=$!
  for _ in $(seq 200); do ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/127.0.0.1/2049" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}
ganesha_netns_stop() {
  local ns=$1
  ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
  sleep 1
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns" 2>/dev/null || true
}
