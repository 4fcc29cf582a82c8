#include "lib/base/trace_ring.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace nfsrdma {
namespace {

TEST(TraceRing, KeepsTheLatestEventsOldestFirst) {
  TraceRing<8> ring;
  EXPECT_TRUE(ring.last(8).empty());
  for (std::uint32_t i = 0; i < 3; ++i) ring.record(100 + i, i, 1);
  auto few = ring.last(8);
  ASSERT_EQ(few.size(), 3u);
  EXPECT_EQ(few[0].id, 100u);
  EXPECT_EQ(few[2].id, 102u);
  for (std::uint32_t i = 3; i < 20; ++i) ring.record(100 + i, i, static_cast<std::uint8_t>(i));
  auto all = ring.last(100);
  ASSERT_EQ(all.size(), 8u);  // no more than it holds
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].id, 112 + k);
    EXPECT_EQ(all[k].slot, 12 + k);
    EXPECT_EQ(all[k].state, 12 + k);
    if (k) {
      EXPECT_LE(all[k - 1].ns, all[k].ns);
    }
  }
  auto two = ring.last(2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].id, 118u);
  EXPECT_EQ(ring.recorded(), 20u);
}

// Writers on several threads and a reader beside them: every event read is
// one that was written whole (its three fields agree), none read twice.
TEST(TraceRing, AReaderBesideWritersSeesOnlyWholeEvents) {
  TraceRing<64> ring;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (std::uint32_t t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (std::uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::uint32_t v = (t << 24) | (i & 0xffffff);
        ring.record(v, static_cast<std::uint16_t>(v), static_cast<std::uint8_t>(v >> 3));
      }
    });
  }
  std::size_t seen = 0;
  for (int round = 0; round < 20000; ++round) {
    for (const auto& e : ring.last(64)) {
      ASSERT_EQ(e.slot, static_cast<std::uint16_t>(e.id));
      ASSERT_EQ(e.state, static_cast<std::uint8_t>(e.id >> 3));
      ++seen;
    }
  }
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_GT(seen, 0u);
}

}  // namespace
}  // namespace nfsrdma
