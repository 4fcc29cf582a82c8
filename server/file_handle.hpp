// NFS file handles (RFC 1813 §2.3.3) built from Linux file handles
// (name_to_handle_at), so they survive a server restart, and authenticated with
// a keyed MAC so a client cannot forge one that reaches outside its export.
//
// Layout (big-endian), at most 64 bytes:
//   0  version (1)          1  kernel handle length n (<= 44)   2-3 zero
//   4  export id (u32)      8  kernel handle type (i32)
//   12 kernel handle (n bytes)
//   12+n  SipHash-2-4 of bytes [0, 12+n) under the server's key (8 bytes)
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "lib/base/result.hpp"
#include "lib/base/siphash.hpp"
#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::server {

constexpr std::size_t kMaxKernelHandle = 44;

struct KernelHandle {
  std::int32_t type = 0;
  std::uint32_t len = 0;
  std::array<std::uint8_t, kMaxKernelHandle> bytes{};
};

class HandleCodec {
 public:
  explicit HandleCodec(const SipKey& key) : key_(key) {}

  nfs3::nfs_fh3 encode(std::uint32_t export_id, const KernelHandle& kh) const;
  // NFS3ERR_BADHANDLE for anything malformed or not made with our key.
  nfs3::nfsstat3 decode(const nfs3::nfs_fh3& fh, std::uint32_t& export_id, KernelHandle& kh) const;

 private:
  SipKey key_;
};

// The key lives in STATE_DIR/fh.key (created once, mode 0600), so handles stay
// valid across restarts.
Result<SipKey> load_or_create_key(const std::string& state_dir);

}  // namespace nfsrdma::server
