#include "lib/rpc/rpc.hpp"
#include "lib/rpc/transport.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::rpc {
namespace {

using Bytes = std::vector<std::uint8_t>;

// An NFSv3 GETATTR call with AUTH_SYS uid 1000 gid 100 groups {100, 27}, machine
// "box", worked out by hand from RFC 5531 §9 and Appendix A.
const Bytes kCall = {
    0x12, 0x34, 0x56, 0x78,  // xid
    0, 0, 0, 0,              // CALL
    0, 0, 0, 2,              // rpcvers
    0, 1, 0x86, 0xa3,        // prog 100003
    0, 0, 0, 3,              // vers
    0, 0, 0, 1,              // proc GETATTR
    0, 0, 0, 1,              // cred flavor AUTH_SYS
    0, 0, 0, 32,             // cred body length
    0, 0, 0, 9,              //   stamp
    0, 0, 0, 3, 'b', 'o', 'x', 0,  // machinename
    0, 0, 0x03, 0xe8,        //   uid 1000
    0, 0, 0, 100,            //   gid 100
    0, 0, 0, 2, 0, 0, 0, 100, 0, 0, 0, 27,  // gids
    0, 0, 0, 0, 0, 0, 0, 0,  // verf AUTH_NONE, empty
};

TEST(Rpc, DecodesGoldenCall) {
  xdr::Decoder d(kCall);
  auto h = decode_call(d);
  ASSERT_TRUE(h.ok()) << h.error().describe();
  EXPECT_EQ(h->xid, 0x12345678u);
  EXPECT_EQ(h->prog, 100003u);
  EXPECT_EQ(h->vers, 3u);
  EXPECT_EQ(h->proc, 1u);
  EXPECT_EQ(h->cred.flavor, AuthFlavor::sys);
  EXPECT_EQ(d.remaining(), 0u);
  auto a = decode_auth_sys(h->cred.body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->machinename, "box");
  EXPECT_EQ(a->uid, 1000u);
  EXPECT_EQ(a->gid, 100u);
  ASSERT_EQ(a->ngids, 2u);
  EXPECT_EQ(a->gids[1], 27u);
}

TEST(Rpc, EncodesGoldenCall) {
  AuthSys a;
  a.stamp = 9;
  a.machinename = "box";
  a.uid = 1000;
  a.gid = 100;
  a.ngids = 2;
  a.gids[0] = 100;
  a.gids[1] = 27;
  Bytes body;
  xdr::Encoder be(body);
  encode_auth_sys(be, a);
  CallHeader h;
  h.xid = 0x12345678;
  h.prog = 100003;
  h.vers = 3;
  h.proc = 1;
  h.cred = {AuthFlavor::sys, body};
  Bytes out;
  xdr::Encoder e(out);
  encode_call(e, h);
  EXPECT_EQ(out, kCall);
}

TEST(Rpc, CallTruncatedAtEveryOffsetFails) {
  for (std::size_t n = 0; n < kCall.size(); ++n) {
    Bytes cut(kCall.begin(), kCall.begin() + static_cast<long>(n));
    xdr::Decoder d(cut);
    EXPECT_FALSE(decode_call(d).ok()) << n;
  }
}

TEST(Rpc, AuthSysTooManyGroupsRefused) {
  Bytes body = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 17};
  body.resize(body.size() + 17 * 4);
  EXPECT_FALSE(decode_auth_sys(body).ok());
}

TEST(Rpc, ReplyMessagesRoundTrip) {
  Bytes out;
  xdr::Encoder e(out);
  encode_accepted(e, 7, AcceptStat::prog_mismatch, 3, 3);
  EXPECT_EQ(out, (Bytes{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                        0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3}));
  xdr::Decoder d(out);
  auto r = decode_reply(d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->accept, AcceptStat::prog_mismatch);
  EXPECT_EQ(r->low, 3u);

  out.clear();
  encode_auth_error(e, 8, AuthStat::tooweak);
  xdr::Decoder d2(out);
  auto r2 = decode_reply(d2);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->stat, ReplyStat::denied);
  EXPECT_EQ(r2->auth, AuthStat::tooweak);

  out.clear();
  encode_rpc_mismatch(e, 9);
  xdr::Decoder d3(out);
  auto r3 = decode_reply(d3);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->reject, RejectStat::rpc_mismatch);
  EXPECT_EQ(r3->high, 2u);
}

TEST(Rpc, CallIsNotAReply) {
  xdr::Decoder d(kCall);
  EXPECT_FALSE(decode_reply(d).ok());
}

TEST(Addresses, FromV6UndoesToV6AndKnowsLoopback) {
  const std::array<std::uint8_t, 16> v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};
  const std::array<std::uint8_t, 16> v6 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  EXPECT_EQ(from_v6(v4).ss_family, AF_INET);
  EXPECT_EQ(from_v6(v6).ss_family, AF_INET6);
  EXPECT_EQ(to_v6(from_v6(v4)), v4);
  EXPECT_EQ(to_v6(from_v6(v6)), v6);
  EXPECT_FALSE(is_loopback(from_v6(v4)));
  EXPECT_TRUE(is_loopback(from_v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 9})));
  EXPECT_TRUE(is_loopback(from_v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})));
}

}  // namespace
}  // namespace nfsrdma::rpc
