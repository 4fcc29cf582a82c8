#include "lib/rpcrdma/private_data.hpp"

#include <algorithm>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpcrdma {
namespace {

std::uint8_t size_code(std::uint32_t bytes) {
  std::uint32_t kib = std::clamp<std::uint32_t>(bytes / 1024, 1, 256);
  return static_cast<std::uint8_t>(kib - 1);
}

std::optional<ConnectPrivate> decode_at(std::span<const std::uint8_t> d) {
  if (d.size() < 8) return std::nullopt;
  std::uint32_t magic = xdr::load_be32(d.data());
  if (magic != kPrivateMagic) return std::nullopt;
  ConnectPrivate p;
  p.version = d[4];
  p.remote_invalidate = (d[5] & 1) != 0;
  p.send_size = (std::uint32_t{d[6]} + 1) * 1024;
  p.recv_size = (std::uint32_t{d[7]} + 1) * 1024;
  return p;
}

}  // namespace

std::array<std::uint8_t, 8> encode_private(const ConnectPrivate& p) {
  return {0xf6, 0xab, 0x0e, 0x18, p.version, static_cast<std::uint8_t>(p.remote_invalidate ? 1 : 0),
          size_code(p.send_size), size_code(p.recv_size)};
}

std::optional<ConnectPrivate> decode_private(std::span<const std::uint8_t> data) {
  if (auto p = decode_at(data)) return p;
  // A length byte in front; when what follows is not ours after all (the
  // kernel's 0xab below is a plausible length too), go on to the next reading.
  if (!data.empty() && data[0] >= 8 && data[0] < data.size()) {
    if (auto p = decode_at(data.subspan(1))) return p;
  }
  // libfabric's verbs provider reads the first byte of a peer's private data
  // as the length of what follows and hands over the rest: from the Linux
  // kernel (which sends RFC 8797 data unframed) the magic's first byte is gone.
  if (data.size() >= 7 && data[0] == 0xab && data[1] == 0x0e && data[2] == 0x18) {
    std::array<std::uint8_t, 8> whole{0xf6};
    std::copy_n(data.begin(), 7, whole.begin() + 1);
    auto p = decode_at(whole);
    if (p) p->peer_cannot_read_ours = true;
    return p;
  }
  return std::nullopt;
}

std::uint32_t peer_receive_inline(const std::optional<ConnectPrivate>& theirs, std::uint32_t ours) {
  if (!theirs) return std::min(kLegacyInline, ours);
  std::uint32_t theirs_bytes = theirs->peer_cannot_read_ours ? std::min(theirs->recv_size, kLegacyInline)
                                                             : theirs->recv_size;
  return std::min(theirs_bytes, ours);
}

std::uint32_t peer_send_inline(const std::optional<ConnectPrivate>& theirs, std::uint32_t ours) {
  if (!theirs) return std::min(kLegacyInline, ours);
  return std::min(theirs->send_size, ours);
}

}  // namespace nfsrdma::rpcrdma
