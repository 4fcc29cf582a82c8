#include "lib/transport/tcp/record.hpp"

#include <gtest/gtest.h>

#include <time.h>

#include <cstdio>
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
    r.commit(n);
    for (;;) {
      auto done = r.parse();
      if (!done) return done.error();
      if (!*done) break;
      out.push_back(r.take());
    }
  }
  EXPECT_FALSE(r.has_unparsed());
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

TEST(BufferShelf, KeepsTheLargestBuffersUpToItsCountAndLendsTheSmallestThatFits) {
  constexpr std::size_t k = BufferShelf::kMinBytes;
  BufferShelf shelf(2);
  Bytes small(1000), big(k), bigger(4 * k), third(k), largest(8 * k);
  const auto *big_at = big.data(), *bigger_at = bigger.data(), *largest_at = largest.data();
  shelf.give(std::move(small));
  EXPECT_EQ(shelf.kept(), 0u) << "a small buffer is not worth keeping";
  shelf.give(std::move(bigger));
  shelf.give(std::move(big));
  shelf.give(std::move(third));
  EXPECT_EQ(shelf.kept(), 2u) << "no more than its count";
  Bytes got = shelf.take(k);
  EXPECT_EQ(got.data(), big_at) << "the smallest that fits";
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(shelf.take(8 * k).capacity(), 0u) << "none fits: nothing lent";
  shelf.give(std::move(got));
  shelf.give(std::move(largest));
  EXPECT_EQ(shelf.kept(), 2u);
  EXPECT_EQ(shelf.take(k).data(), bigger_at) << "full: the larger one took the smallest one's place";
  EXPECT_EQ(shelf.take(k).data(), largest_at);
  EXPECT_EQ(shelf.kept(), 0u);
}

TEST(BufferShelf, KeepsSmallBuffersUpToTheirCountAndNoneBetweenTheSizes) {
  BufferShelf shelf(1, 2);
  Bytes a(100), b(BufferShelf::kSmallMaxBytes), c(200), middle(BufferShelf::kSmallMaxBytes + 1), none;
  const auto* b_at = b.data();
  shelf.give(std::move(none));
  shelf.give(std::move(middle));
  EXPECT_EQ(shelf.kept(), 0u) << "no room, or between the two sizes: freed";
  shelf.give(std::move(a));
  shelf.give(std::move(b));
  shelf.give(std::move(c));
  EXPECT_EQ(shelf.kept(), 2u) << "no more than its count";
  Bytes got = shelf.take(1000);
  EXPECT_EQ(got.data(), b_at) << "the last given";
  EXPECT_TRUE(got.empty());
  EXPECT_GE(got.capacity(), 1000u);
  EXPECT_EQ(shelf.take(BufferShelf::kSmallMaxBytes + 1).capacity(), 0u)
      << "between the sizes: a small one would be grown out of the shelf, and lost";
  EXPECT_EQ(shelf.kept(), 1u);
  EXPECT_GE(shelf.take(5000).capacity(), 5000u) << "grown to what is asked";
  EXPECT_EQ(shelf.take(10).capacity(), 0u) << "none left";
}

TEST(BufferShelf, ASmallRecordIsAssembledInKeptRoom) {
  BufferShelf shelf(1, 1);
  RecordReader r(1u << 20, &shelf);
  Bytes stream = {0x80, 0x00, 0x01, 0x00};  // one last fragment of 256 bytes
  stream.resize(4 + 256, 0x33);
  auto first = feed(r, stream, 4096);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const auto* at = (*first)[0].data();
  shelf.give(std::move((*first)[0]));
  auto second = feed(r, stream, 4096);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].data(), at) << "the second record did not reuse the first one's room";
  EXPECT_EQ((*second)[0], Bytes(256, 0x33));
}

TEST(BufferShelf, ALargeRecordIsAssembledInKeptRoom) {
  BufferShelf shelf(4);
  RecordReader r(8u << 20, &shelf);
  const std::size_t n = 1u << 20;
  Bytes stream = {0x80, 0x10, 0x00, 0x00};  // one last fragment of 1 MiB
  stream.resize(4 + n, 0x5a);
  auto first = feed(r, stream, 64 * 1024);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const auto* at = (*first)[0].data();
  shelf.give(std::move((*first)[0]));
  auto second = feed(r, stream, 64 * 1024);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].data(), at) << "the second record did not reuse the first one's room";
  EXPECT_EQ((*second)[0], Bytes(n, 0x5a));
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

// Many records and fragments in one read: every record comes out of the staged bytes.
TEST(RecordMarking, ManyRecordsInOneRead) {
  Bytes s;
  for (std::uint8_t i = 1; i <= 50; ++i) {
    for (int f = 0; f < 3; ++f) {
      s.insert(s.end(), {static_cast<std::uint8_t>(f == 2 ? 0x80 : 0), 0, 0, 1, static_cast<std::uint8_t>(i + f)});
    }
  }
  RecordReader r(1024);
  auto recs = feed(r, s, s.size());
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 50u);
  EXPECT_EQ((*recs)[49], (Bytes{50, 51, 52}));
}

// A reader given a larger stage takes a batch of replies smaller than the
// direct size (15 of 4 KiB) in one read, in order; the default takes 16 KiB.
TEST(RecordMarking, ALargerStageTakesABatchOfSmallRecordsInOneRead) {
  Bytes s;
  for (std::uint8_t i = 0; i < 15; ++i) {
    const auto mark = record_mark(4096);
    s.insert(s.end(), mark.begin(), mark.end());
    s.insert(s.end(), 4096, i);
  }
  EXPECT_EQ(RecordReader(1 << 20).buffer().size(), RecordReader::kDirectBytes);
  RecordReader r(1 << 20, nullptr, 64 * 1024);
  EXPECT_EQ(r.buffer().size(), 64u * 1024);
  std::size_t reads = 0;
  std::vector<Bytes> recs;
  for (std::size_t at = 0; at < s.size(); ++reads) {
    auto buf = r.buffer();
    const std::size_t n = std::min(buf.size(), s.size() - at);
    std::memcpy(buf.data(), s.data() + at, n);
    at += n;
    r.commit(n);
    for (auto done = r.parse(); done.ok() && *done; done = r.parse()) recs.push_back(r.take());
  }
  EXPECT_EQ(reads, 1u);
  EXPECT_FALSE(r.in_record());
  auto buf = r.buffer();
  std::memcpy(buf.data(), s.data(), 6);  // a header and 2 bytes of the next
  r.commit(6);
  auto partial = r.parse();
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(*partial);
  EXPECT_TRUE(r.in_record());
  ASSERT_EQ(recs.size(), 15u);
  for (std::uint8_t i = 0; i < 15; ++i) EXPECT_EQ(recs[i], Bytes(4096, i));
}

// A large fragment mixing staged and direct reads keeps its bytes in order.
TEST(RecordMarking, LargeFragmentsAcrossStagedAndDirectReads) {
  Bytes payload(300 * 1024);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7 + i / 251);
  Bytes s;
  const std::size_t half = payload.size() / 2;
  for (int f = 0; f < 2; ++f) {
    auto mark = record_mark(static_cast<std::uint32_t>(half));
    if (f == 0) mark[0] &= 0x7f;
    s.insert(s.end(), mark.begin(), mark.end());
    s.insert(s.end(), payload.begin() + f * static_cast<long>(half), payload.begin() + (f + 1) * static_cast<long>(half));
  }
  for (std::size_t step : {7u, 4096u, 70000u, 1u << 20}) {
    RecordReader r(1 << 20);
    auto recs = feed(r, s, step);
    ASSERT_TRUE(recs.ok());
    ASSERT_EQ(recs->size(), 1u) << step;
    EXPECT_EQ((*recs)[0], payload) << step;
  }
}

// Linear in the bytes received: a record in one-byte fragments four times as
// long costs about four times as much (re-reserving the record on every
// fragment made it quadratic: a 1 MiB record took seconds). CPU time of this
// thread, in this run; the same bytes as whole records are printed beside.
double cpu_seconds_to_parse(const Bytes& stream, std::size_t records) {
  timespec a{}, b{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (int rep = 0; rep < 3; ++rep) {
    RecordReader r((1 << 20) + 64);
    auto recs = feed(r, stream, 1 << 16);
    EXPECT_TRUE(recs.ok());
    EXPECT_EQ(recs.ok() ? recs->size() : 0, records);
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return (static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) / 1e9) / 3;
}

Bytes one_byte_fragments(std::size_t record) {
  Bytes out;
  out.reserve(5 * record);
  for (std::size_t i = 0; i < record; ++i) {
    out.insert(out.end(), {static_cast<std::uint8_t>(i + 1 == record ? 0x80 : 0), 0, 0, 1, static_cast<std::uint8_t>(i)});
  }
  return out;
}

TEST(RecordMarking, OneByteFragmentsCostLinearTime) {
  constexpr std::size_t kRecord = 1 << 20;
  const double quarter = cpu_seconds_to_parse(one_byte_fragments(kRecord / 4), 1);
  const double full = cpu_seconds_to_parse(one_byte_fragments(kRecord), 1);
  Bytes whole;
  for (int k = 0; k < 5; ++k) {
    auto mark = record_mark(kRecord);
    whole.insert(whole.end(), mark.begin(), mark.end());
    whole.resize(whole.size() + kRecord, static_cast<std::uint8_t>(k));
  }
  const double single = cpu_seconds_to_parse(whole, 5);
  std::printf("1-byte fragments: 256 KiB record %.1f ms, 1 MiB record %.1f ms (x%.1f); "
              "the same 5 MiB as whole 1 MiB records %.1f ms\n",
              quarter * 1e3, full * 1e3, full / quarter, single * 1e3);
  EXPECT_LT(full, 8 * quarter + 0.005) << "four times the bytes cost more than eight times the time";
}

}  // namespace
}  // namespace nfsrdma::tcp
