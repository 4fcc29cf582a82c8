#include "server/portmap_service.hpp"

#include <arpa/inet.h>

#include <algorithm>

#include "lib/base/log.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/tcp/tcp_client.hpp"
#include "server/exports.hpp"

namespace nfsrdma::server {

using namespace portmap2;

namespace {
// Local processes may SET mappings; this many at most.
constexpr std::size_t kMaxMappings = 1024;
}  // namespace

void PortmapService::add(const mapping& m) {
  std::lock_guard lk(mu_);
  map_.push_back(m);
}

rpc::AcceptStat PortmapService::handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in,
                                       xdr::Encoder& out) {
  switch (static_cast<Proc>(proc)) {
    case Proc::NULL_:
      return rpc::AcceptStat::success;
    case Proc::SET:
    case Proc::UNSET: {
      mapping m;
      if (!xdr::decode(in, m).ok()) return rpc::AcceptStat::garbage_args;
      bool ok = false;
      if (rpc::is_loopback(ctx.peer.addr)) {  // only processes on this host may change the map
        std::lock_guard lk(mu_);
        auto same = [&](const mapping& e) {
          return e.prog == m.prog && e.vers == m.vers && (proc == 2 || e.prot == m.prot);
        };
        if (static_cast<Proc>(proc) == Proc::SET) {
          // Bounded, so DUMP's list always fits its encoding.
          ok = map_.size() < kMaxMappings && std::none_of(map_.begin(), map_.end(), same);
          if (ok) map_.push_back(m);
        } else {
          ok = std::erase_if(map_, same) > 0;
        }
      }
      out.boolean(ok);
      return rpc::AcceptStat::success;
    }
    case Proc::GETPORT: {
      mapping m;
      if (!xdr::decode(in, m).ok()) return rpc::AcceptStat::garbage_args;
      std::uint32_t port = 0;
      std::lock_guard lk(mu_);
      for (const auto& e : map_) {
        if (e.prog == m.prog && e.vers == m.vers && e.prot == m.prot) port = e.port;
      }
      out.u32(port);
      return rpc::AcceptStat::success;
    }
    case Proc::DUMP: {
      PmapList l;
      {
        std::lock_guard lk(mu_);
        l.entries = map_;
      }
      codec(out, l);
      return rpc::AcceptStat::success;
    }
    case Proc::CALLIT:
      break;  // indirect calls are an amplification risk; rpcbind refuses them too
  }
  return rpc::AcceptStat::proc_unavail;
}

bool register_with_rpcbind(const std::vector<mapping>& mappings, bool set) {
  auto conn = tcp::TcpClient::connect("127.0.0.1", kPort, {.reserved_port = true});
  if (!conn) {
    spdlog::debug("portmap: no rpcbind on 127.0.0.1:111 ({})", conn.error().describe());
    return false;
  }
  bool all = true;
  for (const auto& m : mappings) {
    const std::vector<Proc> steps = set ? std::vector<Proc>{Proc::UNSET, Proc::SET} : std::vector<Proc>{Proc::UNSET};
    for (Proc p : steps) {
      std::vector<std::uint8_t> args;
      xdr::encode(args, m);
      auto reply = rpc::call_sync(**conn, kProgram, kVersion, static_cast<std::uint32_t>(p), args, {}, 5000);
      bool ok = false;
      if (reply) {
        xdr::Decoder d(*reply);
        d.boolean(ok);
      }
      if (p == Proc::SET && !ok) {
        spdlog::warn("portmap: rpcbind refused to register program {} version {} on port {}", m.prog, m.vers, m.port);
        all = false;
      }
    }
  }
  (*conn)->shutdown();
  if (all && set) spdlog::info("portmap: registered with rpcbind on 127.0.0.1:111");
  return all;
}

}  // namespace nfsrdma::server
