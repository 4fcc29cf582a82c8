#include "lib/base/siphash.hpp"

#include <sodium.h>

namespace nfsrdma {

static_assert(crypto_shorthash_BYTES == 8 && crypto_shorthash_KEYBYTES == std::tuple_size_v<SipKey>);

std::uint64_t siphash24(const SipKey& key, std::span<const std::uint8_t> data) {
  // libsodium's crypto_shorthash is SipHash-2-4; its 8 bytes are the
  // 64-bit value, little-endian.
  static const bool ready = sodium_init() >= 0;
  (void)ready;
  unsigned char out[crypto_shorthash_BYTES];
  crypto_shorthash(out, data.data(), data.size(), key.data());
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | out[i];
  return v;
}

}  // namespace nfsrdma
