#include "server/file_handle.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace nfsrdma::server {
namespace {

KernelHandle sample() {
  KernelHandle kh;
  kh.type = 1;
  kh.len = 8;
  for (std::uint32_t i = 0; i < 8; ++i) kh.bytes[i] = static_cast<std::uint8_t>(i * 3);
  return kh;
}

TEST(FileHandle, RoundTrip) {
  HandleCodec c(SipKey{1, 2, 3});
  nfs3::nfs_fh3 fh = c.encode(0xabcd, sample());
  EXPECT_EQ(fh.len, 28u);
  std::uint32_t id = 0;
  KernelHandle kh;
  ASSERT_EQ(c.decode(fh, id, kh), nfs3::NFS3_OK);
  EXPECT_EQ(id, 0xabcdu);
  EXPECT_EQ(kh.type, 1);
  EXPECT_EQ(kh.len, 8u);
  EXPECT_EQ(kh.bytes[7], 21);
}

// A handle made on 2026-11-23 (hand-written SipHash): handles clients hold
// must stay valid across server upgrades, whatever computes the MAC.
TEST(FileHandle, AHandleMadeBeforeStaysTheSame) {
  SipKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(0xa0 + i);
  nfs3::nfs_fh3 fh = HandleCodec(key).encode(0x5eed0001, sample());
  std::string hex;
  for (std::uint32_t i = 0; i < fh.len; ++i) hex += fmt::format("{:02x}", fh.data[i]);
  EXPECT_EQ(hex, "010800005eed000100000001000306090c0f12154374993e2668e0c7");
  std::uint32_t id = 0;
  KernelHandle kh;
  EXPECT_EQ(HandleCodec(key).decode(fh, id, kh), nfs3::NFS3_OK);
}

TEST(FileHandle, EveryFlippedBitIsRefused) {
  HandleCodec c(SipKey{1, 2, 3});
  nfs3::nfs_fh3 fh = c.encode(7, sample());
  for (std::uint32_t byte = 0; byte < fh.len; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      nfs3::nfs_fh3 bad = fh;
      bad.data[byte] ^= static_cast<std::uint8_t>(1 << bit);
      std::uint32_t id = 0;
      KernelHandle kh;
      EXPECT_EQ(c.decode(bad, id, kh), nfs3::NFS3ERR_BADHANDLE) << byte << ":" << bit;
    }
  }
}

TEST(FileHandle, OtherKeyOrLengthRefused) {
  nfs3::nfs_fh3 fh = HandleCodec(SipKey{1}).encode(7, sample());
  std::uint32_t id = 0;
  KernelHandle kh;
  EXPECT_EQ(HandleCodec(SipKey{2}).decode(fh, id, kh), nfs3::NFS3ERR_BADHANDLE);
  for (std::uint32_t n = 0; n < fh.len; ++n) {
    nfs3::nfs_fh3 cut = fh;
    cut.len = n;
    EXPECT_EQ(HandleCodec(SipKey{1}).decode(cut, id, kh), nfs3::NFS3ERR_BADHANDLE);
  }
}

TEST(FileHandle, KeyPersistsInStateDir) {
  std::string dir = ::testing::TempDir() + "/fhkey-" + std::to_string(::getpid());
  auto a = load_or_create_key(dir);
  ASSERT_TRUE(a.ok()) << a.error().describe();
  auto b = load_or_create_key(dir);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace nfsrdma::server
