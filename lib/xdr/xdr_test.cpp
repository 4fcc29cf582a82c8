#include "lib/xdr/xdr.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::xdr {
namespace {

using Bytes = std::vector<std::uint8_t>;

struct Sample {
  std::uint32_t a = 0;
  std::int64_t b = 0;
  bool flag = false;
  std::string name;
  std::optional<std::uint32_t> maybe;
  std::vector<std::uint32_t> list;
};


template <class X>
void codec(X& x, Sample& s) {
  x.u32(s.a);
  x.i64(s.b);
  x.boolean(s.flag);
  x.string(s.name, 8);
  xdr_optional(x, s.maybe);
  xdr_array(x, s.list, 4, 4);
}

// Worked by hand from RFC 4506 §4: big-endian words, strings padded to 4.
const Bytes kGolden = {
    0x00, 0x00, 0x01, 0x02,                          // a = 258
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,  // b = -2 (hyper)
    0x00, 0x00, 0x00, 0x01,                          // flag = TRUE
    0x00, 0x00, 0x00, 0x03, 'a', 'b', 'c', 0x00,     // "abc" + 1 pad byte
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07,  // optional present, 7
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x05,  // list of 2: 5,
    0x00, 0x00, 0x00, 0x06,                          //            6
};

Sample golden_value() {
  Sample s;
  s.a = 258;
  s.b = -2;
  s.flag = true;
  s.name = "abc";
  s.maybe = 7;
  s.list = {5, 6};
  return s;
}

TEST(Xdr, EncodesGoldenBytes) {
  Bytes out;
  encode(out, golden_value());
  EXPECT_EQ(out, kGolden);
}

TEST(Xdr, DecodesGoldenBytes) {
  Sample s;
  ASSERT_TRUE(decode(kGolden, s).ok());
  EXPECT_EQ(s.a, 258u);
  EXPECT_EQ(s.b, -2);
  EXPECT_TRUE(s.flag);
  EXPECT_EQ(s.name, "abc");
  EXPECT_EQ(s.maybe, 7u);
  EXPECT_EQ(s.list, (std::vector<std::uint32_t>{5, 6}));
}

// The golden stream split where a Read chunk would cut it: "abc" apart, the
// inline part without it and its round-up.
struct SplitGolden {
  Bytes inline_part = cut();
  Bytes abc = {'a', 'b', 'c'};
  Parts parts() const { return {std::span(inline_part).first(20), abc, std::span(inline_part).subspan(20)}; }
  static Bytes cut() {
    Bytes c(kGolden.begin(), kGolden.begin() + 20);
    c.insert(c.end(), kGolden.begin() + 24, kGolden.end());
    return c;
  }
};

// Placed back, the body decodes as if inline.
TEST(Xdr, PlacedOpaqueBodyDecodesAsIfInline) {
  SplitGolden g;
  Sample s;
  Decoder d(g.parts());
  codec(d, s);
  ASSERT_TRUE(d.ok()) << fault_name(d.fault());
  EXPECT_EQ(s.name, "abc");
  EXPECT_EQ(s.list, (std::vector<std::uint32_t>{5, 6}));
  EXPECT_EQ(d.remaining(), 0u);
}

TEST(Xdr, PlacedBodyOfTheWrongLengthOrPositionIsRefused) {
  const Bytes cut = SplitGolden::cut();
  const Bytes abcd = {'a', 'b', 'c', 'd'}, abc = {'a', 'b', 'c'};
  for (auto [at, body] : {std::pair{std::size_t{20}, abcd}, {8, abc}, {12, abc}, {16, abc}}) {
    Sample s;
    Decoder d(Parts{std::span(cut).first(at), body, std::span(cut).subspan(at)});
    codec(d, s);
    EXPECT_EQ(d.fault(), Fault::bad_value) << "placed at " << at << ", " << body.size() << " bytes";
  }
}

TEST(Xdr, PartsCopyTheStreamWithTheRoundUp) {
  SplitGolden g;
  const Parts m = g.parts();
  ASSERT_EQ(m.stream_bytes(), kGolden.size());
  for (std::size_t from = 0; from <= kGolden.size(); ++from) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5}, kGolden.size()}) {
      const std::size_t k = std::min(n, kGolden.size() - from);
      Bytes out(k, 0xee);
      m.copy(from, n, out.data());
      EXPECT_TRUE(std::equal(out.begin(), out.end(), kGolden.begin() + static_cast<long>(from)))
          << n << " bytes from " << from;
    }
  }
  EXPECT_FALSE(Parts{kGolden}.split());
  EXPECT_TRUE(m.split());
}

// What is left of a split message stays split until its payload is read:
// a reply's result handed on past its RPC header keeps the placed data.
TEST(Xdr, UnreadStaysSplitUntilThePayloadIsRead) {
  SplitGolden g;
  Decoder d(g.parts());
  std::uint32_t a = 0;
  d.u32(a);
  Parts rest = d.unread();
  EXPECT_EQ(rest.head.size(), 16u);
  EXPECT_EQ(rest.payload.data(), g.abc.data());
  Decoder r(rest);
  std::int64_t b = 0;
  bool flag = false;
  std::span<const std::uint8_t> name;
  r.i64(b);
  r.boolean(flag);
  r.opaque_view(name, 8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(name.data(), g.abc.data());
  EXPECT_FALSE(r.unread().split());
  EXPECT_EQ(r.unread().head.size(), 20u);
}

TEST(Xdr, TruncationAtEveryOffsetFails) {
  for (std::size_t n = 0; n < kGolden.size(); ++n) {
    Sample s;
    Bytes cut(kGolden.begin(), kGolden.begin() + static_cast<long>(n));
    auto r = decode(cut, s);
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes decoded";
  }
}

TEST(Xdr, StringOverCapIsRefused) {
  Bytes in = {0, 0, 0, 9, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 0, 0, 0};
  Decoder d(in);
  std::string s;
  d.string(s, 8);
  EXPECT_EQ(d.fault(), Fault::too_long);
}

TEST(Xdr, LengthNearTwoToThe32DoesNotWrap) {
  Bytes in = {0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4};
  Decoder d(in);
  std::span<const std::uint8_t> v;
  d.opaque_view(v, 0xffffffffu);
  EXPECT_EQ(d.fault(), Fault::truncated);
  EXPECT_TRUE(v.empty());
}

TEST(Xdr, ArrayCountBoundedByRemainingBytes) {
  // Claims 4 elements (within the cap) but carries one.
  Bytes in = {0, 0, 0, 4, 0, 0, 0, 1};
  Decoder d(in);
  std::vector<std::uint32_t> v;
  xdr_array(d, v, 4, 4);
  EXPECT_EQ(d.fault(), Fault::truncated);
  EXPECT_TRUE(v.empty());
}

TEST(Xdr, BoolOutsideRangeIsRefused) {
  Bytes in = {0, 0, 0, 2};
  Decoder d(in);
  bool b = false;
  d.boolean(b);
  EXPECT_EQ(d.fault(), Fault::bad_value);
}

TEST(Xdr, ReserveAndCommitOpaqueInPlace) {
  Bytes out;
  Encoder e(out);
  e.u32(1);
  auto at = e.reserve_opaque(16);
  auto room = e.reserved(at, 16);
  room[0] = 'x';
  room[1] = 'y';
  room[2] = 'z';
  e.commit_opaque(at, 3);
  EXPECT_EQ(out, (Bytes{0, 0, 0, 1, 0, 0, 0, 3, 'x', 'y', 'z', 0}));
}

}  // namespace
}  // namespace nfsrdma::xdr
