#include "lib/transport/tcp/record.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace nfsrdma::tcp {
namespace {

using Bytes = std::vector<std::uint8_t>;

// Feeds `stream` in pieces of `step` bytes and collects the records.
Result<std::vector<Bytes>> feed(RecordReader& r, const Bytes& stream, std::size_t step) {
  std::vector<Bytes> out;
  std::size_t at = 0;
  while (at < stream.size()) {
    auto buf = r.buffer();
    std::size_t n = std::min({buf.size(), step, stream.size() - at});
    std::memcpy(buf.data(), stream.data() + at, n);
    at += n;
    auto done = r.commit(n);
    if (!done) return done.error();
    if (*done) out.push_back(r.take());
  }
  return out;
}

TEST(RecordMarking, TwoFragmentsMakeOneRecord) {
  // Fragment "abc" (not last), then fragment "de" (last); then a one-fragment record "z".
  Bytes s = {0x00, 0, 0, 3, 'a', 'b', 'c', 0x80, 0, 0, 2, 'd', 'e', 0x80, 0, 0, 1, 'z'};
  for (std::size_t step : {1u, 2u, 3u, 7u, 100u}) {
    RecordReader r(1024);
    auto recs = feed(r, s, step);
    ASSERT_TRUE(recs.ok());
    ASSERT_EQ(recs->size(), 2u) << step;
    EXPECT_EQ((*recs)[0], (Bytes{'a', 'b', 'c', 'd', 'e'}));
    EXPECT_EQ((*recs)[1], (Bytes{'z'}));
  }
}

TEST(RecordMarking, OversizeFragmentRefusedBeforeAllocating) {
  RecordReader r(1024);
  Bytes s = {0xff, 0xff, 0xff, 0xff};  // last fragment of 2^31-1 bytes
  auto recs = feed(r, s, 4);
  EXPECT_FALSE(recs.ok());
}

TEST(RecordMarking, RecordOverLimitAcrossFragmentsRefused) {
  RecordReader r(6);
  Bytes s = {0x00, 0, 0, 4, 1, 2, 3, 4, 0x80, 0, 0, 4, 5, 6, 7, 8};
  auto recs = feed(r, s, 16);
  EXPECT_FALSE(recs.ok());
}

TEST(RecordMarking, MarkEncodesLastFragment) {
  auto m = record_mark(0x102);
  EXPECT_EQ(m[0], 0x80);
  EXPECT_EQ(m[2], 0x01);
  EXPECT_EQ(m[3], 0x02);
}

TEST(RecordMarking, EmptyRecordIgnored) {
  RecordReader r(64);
  Bytes s = {0x80, 0, 0, 0, 0x80, 0, 0, 1, 'q'};
  auto recs = feed(r, s, 3);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 1u);
}

}  // namespace
}  // namespace nfsrdma::tcp
