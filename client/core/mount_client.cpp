#include "client/core/mount_client.hpp"

#include <unistd.h>

#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/portmap2.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::client {

namespace {
constexpr int kTimeoutMs = 10000;
constexpr std::uint16_t kMountPort = 20048;
Error mount_error(const std::string& what) { return Error{ErrorDomain::rpc, 0, Action::fail, what}; }
}  // namespace

Result<std::uint16_t> portmap_getport(const std::string& host, std::uint32_t prog, std::uint32_t vers) {
  auto t = tcp::TcpClient::connect(host, portmap2::kPort);
  if (!t) {
    Error e = t.error();
    const char* what = prog == mount3::kProgram ? "MOUNT" : prog == 100003 ? "NFS" : prog == 100021 ? "NLM" : "an";
    e.message += std::string(" (asking the portmapper for the ") + what +
                 " port: start nfsrdma-server with --portmap, or rpcbind beside it, or give mountport= and, for "
                 "proto=tcp, port=)";
    return e;
  }
  std::vector<std::uint8_t> args;
  xdr::encode(args, portmap2::mapping{prog, vers, portmap2::IPPROTO_TCP_, 0});
  auto reply = rpc::call_sync(**t, portmap2::kProgram, portmap2::kVersion,
                              static_cast<std::uint32_t>(portmap2::Proc::GETPORT), args, std::nullopt, kTimeoutMs);
  (*t)->shutdown();
  if (!reply) return reply.error();
  xdr::Decoder d(*reply);
  std::uint32_t port = 0;
  d.u32(port);
  if (!d.ok() || port == 0 || port > 65535) {
    return mount_error("the portmapper on " + host + " has no TCP port for program " + std::to_string(prog) +
                       " version " + std::to_string(vers));
  }
  return static_cast<std::uint16_t>(port);
}

Result<nfs3::nfs_fh3> mount_export(const std::string& host, std::uint16_t mount_port, const std::string& path,
                                   const std::optional<rpc::AuthSys>& cred, bool resvport) {
  std::optional<Error> no_portmapper;
  if (mount_port == 0) {
    auto p = portmap_getport(host, mount3::kProgram, mount3::kVersion);
    if (!p && p.error().code != ECONNREFUSED) return p.error();
    // No portmapper at all: MOUNT where nfsrdma-server and Linux's mountd
    // (nfs.conf's usual port) listen by default, before giving up.
    if (!p) no_portmapper = p.error();
    mount_port = p ? *p : kMountPort;
  }
  auto t = tcp::TcpClient::connect(host, mount_port, {.reserved_port = resvport});
  if (!t) return no_portmapper ? *no_portmapper : t.error();
  std::vector<std::uint8_t> args;
  xdr::encode(args, mount3::DirPath{path});
  auto reply = rpc::call_sync(**t, mount3::kProgram, mount3::kVersion, static_cast<std::uint32_t>(mount3::Proc::MNT),
                              args, cred, kTimeoutMs);
  (*t)->shutdown();
  if (!reply) return reply.error();
  mount3::MNT3res r;
  if (auto d = xdr::decode(*reply, r); !d) return d.error();
  switch (r.status) {
    case mount3::MNT3_OK: return r.fhandle;
    case mount3::MNT3ERR_ACCES: return mount_error("mounting " + host + ":" + path + " failed: access denied by server");
    case mount3::MNT3ERR_PERM:
      return mount_error("mounting " + host + ":" + path + " failed: permission denied: the export is 'secure' and " +
                         (resvport && ::geteuid() == 0
                              ? std::string("refused our privileged source port")
                              : std::string("MOUNT came from a port above 1023 (") +
                                    (resvport ? "not root" : "noresvport") +
                                    "): add 'insecure' to the export's options, or mount as root with resvport"));
    case mount3::MNT3ERR_NOENT: return mount_error("mounting " + host + ":" + path + " failed: no such export");
    case mount3::MNT3ERR_NOTDIR: return mount_error("mounting " + host + ":" + path + " failed: not a directory");
    default:
      return mount_error("mounting " + host + ":" + path + " failed: MOUNT status " +
                         std::to_string(static_cast<std::uint32_t>(r.status)));
  }
}

}  // namespace nfsrdma::client
