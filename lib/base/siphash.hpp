// SipHash-2-4 (Aumasson & Bernstein, 2012), libsodium's crypto_shorthash: a
// keyed 64-bit PRF. The server uses it to authenticate the file handles it
// issues, to derive export ids, and to checksum calls for the DRC.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace nfsrdma {

using SipKey = std::array<std::uint8_t, 16>;

std::uint64_t siphash24(const SipKey& key, std::span<const std::uint8_t> data);

}  // namespace nfsrdma
