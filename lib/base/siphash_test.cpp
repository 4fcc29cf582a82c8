#include "lib/base/siphash.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace nfsrdma {
namespace {

SipKey reference_key() {
  SipKey k{};
  for (int i = 0; i < 16; ++i) k[i] = static_cast<std::uint8_t>(i);
  return k;
}

// Vectors from the SipHash paper's appendix: key 00..0f, message 00..(n-1).
TEST(SipHash, PaperVectors) {
  std::vector<std::uint8_t> msg;
  EXPECT_EQ(siphash24(reference_key(), msg), 0x726fdb47dd0e0e31ULL);
  for (int i = 0; i < 15; ++i) msg.push_back(static_cast<std::uint8_t>(i));
  EXPECT_EQ(siphash24(reference_key(), msg), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, KeyMatters) {
  std::vector<std::uint8_t> msg{1, 2, 3};
  SipKey other = reference_key();
  other[0] ^= 1;
  EXPECT_NE(siphash24(reference_key(), msg), siphash24(other, msg));
}

}  // namespace
}  // namespace nfsrdma
