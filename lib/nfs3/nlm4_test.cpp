// NLMv4 and NSMv1 codecs: golden vectors, truncation at every byte, bad enums.
#include <gtest/gtest.h>

#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "lib/xdr/xdr_testing.hpp"

namespace nfsrdma {
namespace {

using xdr::testing::Bytes;
using xdr::testing::enc;
using xdr::testing::expect_truncations_fail;

// LOCK: cookie {1,2}, block, exclusive, caller "c", fh {7}, oh {8,9,10},
// svid 42, offset 2^32, length 10, not a reclaim, NSM state 3.
const Bytes kLock = {0, 0, 0, 2, 1, 2, 0, 0,  0, 0, 0, 1,  0, 0, 0, 1,  0, 0, 0, 1, 'c', 0, 0, 0,
                     0, 0, 0, 1, 7, 0, 0, 0,  0, 0, 0, 3, 8, 9, 10, 0,  0, 0, 0, 42,
                     0, 0, 0, 1, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 10,  0, 0, 0, 0,  0, 0, 0, 3};

TEST(Nlm4, LockArgsGolden) {
  nlm4::nlm4_lockargs a;
  a.cookie = {1, 2};
  a.block = a.exclusive = true;
  a.alock = {"c", {7}, {8, 9, 10}, 42, 1ull << 32, 10};
  a.state = 3;
  EXPECT_EQ(enc(a), kLock);
  nlm4::nlm4_lockargs d;
  ASSERT_TRUE(xdr::decode(kLock, d).ok());
  EXPECT_EQ(d.alock.caller_name, "c");
  EXPECT_EQ(d.alock.oh, (Bytes{8, 9, 10}));
  EXPECT_EQ(d.alock.svid, 42);
  EXPECT_EQ(d.alock.l_offset, 1ull << 32);
  EXPECT_EQ(d.alock.l_len, 10u);
  EXPECT_TRUE(d.block && d.exclusive && !d.reclaim);
  EXPECT_EQ(d.state, 3);
  expect_truncations_fail<nlm4::nlm4_lockargs>(kLock);
}

// TEST's answer when denied: the holder (exclusive, svid 5, no oh, 0..EOF).
const Bytes kTestDenied = {0, 0, 0, 0,  0, 0, 0, 1,  0, 0, 0, 1,  0, 0, 0, 5,  0, 0, 0, 0,
                           0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0};

TEST(Nlm4, TestResultCarriesTheHolderOnlyWhenDenied) {
  nlm4::nlm4_testres r;
  r.stat = nlm4::NLM4_DENIED;
  r.holder.exclusive = true;
  r.holder.svid = 5;
  EXPECT_EQ(enc(r), kTestDenied);
  expect_truncations_fail<nlm4::nlm4_testres>(kTestDenied);
  nlm4::nlm4_testres granted;
  EXPECT_EQ(enc(granted), (Bytes{0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Nlm4, BadStatusAndShareModeRefused) {
  nlm4::nlm4_res r;
  EXPECT_FALSE(xdr::decode(Bytes{0, 0, 0, 0, 0, 0, 0, 10}, r).ok());
  nlm4::nlm4_shareargs s;
  s.share = {"h", {1}, {2}, nlm4::fsh4_mode::fsm_DW, nlm4::fsh4_access::fsa_RW};
  Bytes good = enc(s);
  ASSERT_TRUE(xdr::decode(good, s).ok());
  expect_truncations_fail<nlm4::nlm4_shareargs>(good);
  Bytes bad = good;
  bad[good.size() - 9] = 4;  // mode
  EXPECT_FALSE(xdr::decode(bad, s).ok());
}

TEST(Nlm4, OversizedNetobjRefused) {
  Bytes b = {0, 0, 0x04, 0x01};  // a 1025-byte cookie
  b.resize(4 + 1028);
  nlm4::nlm4_res r;
  EXPECT_FALSE(xdr::decode(b, r).ok());
}

// MON of host "h" for "m", calling back NLM (100021) v4 procedure 16.
const Bytes kMon = {0, 0, 0, 1, 'h', 0, 0, 0,  0, 0, 0, 1, 'm', 0, 0, 0,  0, 0x01, 0x86, 0xb5,  0, 0, 0, 4,
                    0, 0, 0, 16,  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

TEST(Nsm1, MonGolden) {
  nsm1::mon m;
  m.id.mon_name = "h";
  m.id.id = {"m", 100021, 4, 16};
  for (int i = 0; i < 16; ++i) m.priv[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i + 1);
  EXPECT_EQ(enc(m), kMon);
  nsm1::mon d;
  ASSERT_TRUE(xdr::decode(kMon, d).ok());
  EXPECT_EQ(d.id.id.my_prog, 100021);
  EXPECT_EQ(d.priv, m.priv);
  expect_truncations_fail<nsm1::mon>(kMon);
}

TEST(Nsm1, NotifyGoldenAndStatResult) {
  const Bytes kNotify = {0, 0, 0, 2, 'a', 'b', 0, 0, 0, 0, 0, 7};
  nsm1::stat_chge n;
  ASSERT_TRUE(xdr::decode(kNotify, n).ok());
  EXPECT_EQ(n.mon_name, "ab");
  EXPECT_EQ(n.state, 7);
  EXPECT_EQ(enc(n), kNotify);
  expect_truncations_fail<nsm1::stat_chge>(kNotify);
  nsm1::sm_stat_res r;
  EXPECT_FALSE(xdr::decode(Bytes{0, 0, 0, 2, 0, 0, 0, 1}, r).ok());
}

}  // namespace
}  // namespace nfsrdma
