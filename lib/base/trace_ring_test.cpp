#include "lib/base/trace_ring.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace nfsrdma {
namespace {

TEST(TraceRing, KeepsTheLatestChangesOldestFirst) {
  TraceRing<8> ring(4);
  EXPECT_TRUE(ring.last(8).empty());
  EXPECT_TRUE(ring.latest().empty());
  for (std::uint32_t i = 0; i < 3; ++i) ring.record(100 + i, 1, static_cast<std::uint8_t>(i));
  auto few = ring.last(8);
  ASSERT_EQ(few.size(), 3u);
  EXPECT_EQ(few[0].id, 100u);
  EXPECT_EQ(few[2].id, 102u);
  for (std::uint32_t i = 3; i < 20; ++i) ring.record(100 + i, static_cast<std::uint16_t>(i % 3), static_cast<std::uint8_t>(i));
  auto all = ring.last(100);
  ASSERT_EQ(all.size(), 8u);  // no more than it holds
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].id, 112 + k);
    EXPECT_EQ(all[k].state, 12 + k);
    if (k) {
      EXPECT_LE(all[k - 1].ns, all[k].ns);
    }
  }
  auto two = ring.last(2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].id, 118u);
}

// A slot's latest change stays however much else happened since: a request
// stuck for longer than the ring holds is still named.
TEST(TraceRing, KeepsEachSlotsLatestChange) {
  TraceRing<4> ring(3);
  ring.record(7, 2, 9);
  for (std::uint32_t i = 0; i < 100; ++i) ring.record(1000 + i, static_cast<std::uint16_t>(i % 2), 1);
  ring.record(5, 7, 3);  // a slot beyond those given: in the ring only
  auto latest = ring.latest();
  ASSERT_EQ(latest.size(), 3u);
  EXPECT_EQ(latest[0].id, 1098u);
  EXPECT_EQ(latest[1].id, 1099u);
  EXPECT_EQ(latest[2].id, 7u);
  EXPECT_EQ(latest[2].state, 9);
  EXPECT_EQ(ring.last(1).at(0).id, 5u);
}

// One writer and a reader beside it: what the reader gets is a run of
// consecutive changes, each whole (its fields agree, times in order).
TEST(TraceRing, AReaderBesideTheWriterSeesWholeChangesInOrder) {
  TraceRing<64> ring(16);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      ring.record(i, static_cast<std::uint16_t>(i & 15), static_cast<std::uint8_t>(i >> 4));
      // A change a microsecond, as a busy connection makes them: unpaced,
      // the writer laps the ring while the reader reads it.
      for (const auto until = steady_ns() + 1000; steady_ns() < until;) {
      }
    }
  });
  while (ring.last(1).empty()) std::this_thread::yield();
  std::size_t seen = 0;
  for (const auto until = steady_ns() + 300'000'000; steady_ns() < until;) {
    auto events = ring.last(64);
    for (std::size_t k = 0; k < events.size(); ++k) {
      const auto& e = events[k];
      ASSERT_EQ(e.slot, e.id & 15);
      ASSERT_EQ(e.state, static_cast<std::uint8_t>(e.id >> 4));
      if (k) {
        ASSERT_GT(e.id, events[k - 1].id);
        ASSERT_GE(e.ns, events[k - 1].ns);
      }
    }
    for (const auto& e : ring.latest()) ASSERT_EQ(e.slot, e.id & 15);
    seen += events.size();
  }
  stop = true;
  writer.join();
  EXPECT_GT(seen, 1000u);
}

}  // namespace
}  // namespace nfsrdma
