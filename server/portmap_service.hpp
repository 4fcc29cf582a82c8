// PORTMAP version 2 (RFC 1833): a minimal portmapper for hosts without rpcbind
// (`--portmap`), and registration with a running rpcbind otherwise.
#pragma once

#include <mutex>
#include <vector>

#include "lib/nfs3/portmap2.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"

namespace nfsrdma::server {

class PortmapService {
 public:
  void add(const portmap2::mapping& m);
  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& args, xdr::Encoder& out);

 private:
  std::mutex mu_;  // guards map_
  std::vector<portmap2::mapping> map_;
};

// Registers (or with `set` false, unregisters) the mappings with the rpcbind on
// 127.0.0.1:111. Returns false, having logged why, when there is none.
bool register_with_rpcbind(const std::vector<portmap2::mapping>& mappings, bool set);

}  // namespace nfsrdma::server
