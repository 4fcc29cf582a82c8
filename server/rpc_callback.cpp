#include "server/rpc_callback.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include "lib/nfs3/portmap2.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::server {

std::string address_text(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, host, sizeof host);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, host, sizeof host);
  }
  return host;
}

Result<std::vector<std::uint8_t>> call_host(const sockaddr_storage& host, std::uint32_t prog, std::uint32_t vers,
                                 std::uint32_t proc, std::span<const std::uint8_t> args, int timeout_ms) {
  const std::string name = address_text(host);
  if (name.empty()) return rpc::rpc_error("callback: the client's address is not IP");
  tcp::TcpClientOptions opts;
  opts.connect_timeout_ms = timeout_ms;
  std::uint32_t port = 0;
  {
    auto pm = tcp::TcpClient::connect(name, portmap2::kPort, opts);
    if (!pm) return pm.error();
    std::vector<std::uint8_t> q;
    xdr::encode(q, portmap2::mapping{prog, vers, portmap2::IPPROTO_TCP_, 0});
    auto r = rpc::call_sync(**pm, portmap2::kProgram, portmap2::kVersion,
                            static_cast<std::uint32_t>(portmap2::Proc::GETPORT), q, {}, timeout_ms);
    (*pm)->shutdown();
    if (!r) return r.error();
    xdr::Decoder d(*r);
    d.u32(port);
    if (!d.ok() || port == 0 || port > 65535) {
      return rpc::rpc_error("callback: " + name + " has no program " + std::to_string(prog) + " version " +
                            std::to_string(vers) + " on TCP");
    }
  }
  auto conn = tcp::TcpClient::connect(name, static_cast<std::uint16_t>(port), opts);
  if (!conn) return conn.error();
  auto r = rpc::call_sync(**conn, prog, vers, proc, args, {}, timeout_ms);
  (*conn)->shutdown();
  return r;
}

}  // namespace nfsrdma::server
