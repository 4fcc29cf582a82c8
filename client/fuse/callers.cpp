// Callers: a request's identity, its groups read from /proc at most once a
// second per thread (callers.hpp says what that staleness can do).
#include "client/fuse/callers.hpp"

#include <algorithm>

namespace nfsrdma::fuse {

client::Identity Callers::of(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return of(static_cast<std::uint32_t>(ctx->pid), ctx->uid, ctx->gid, Clock::now(),
            [req]() -> std::optional<std::vector<std::uint32_t>> {
              gid_t groups[64];
              int n = fuse_req_getgroups(req, 64, groups);
              if (n < 0) return std::nullopt;
              return std::vector<std::uint32_t>(groups, groups + std::min(n, 64));
            });
}

}  // namespace nfsrdma::fuse
