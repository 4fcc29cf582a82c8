// The MOUNT program, version 3 (RFC 1813 Appendix I): hands out root file
// handles to allowed clients, and keeps the list DUMP reports.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "lib/nfs3/mount3.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"
#include "server/fs.hpp"

namespace nfsrdma::server {

class MountService {
 public:
  explicit MountService(const ExportTable& exports) : exports_(exports) {}

  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& args, xdr::Encoder& out);

 private:
  mount3::MNT3res mnt(const CallContext& ctx, const std::string& path);

  const ExportTable& exports_;
  std::mutex mu_;  // guards mounts_
  std::set<std::pair<std::string, std::string>> mounts_;  // (client address, directory)
};

}  // namespace nfsrdma::server
