#include "client/fuse/callers.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::fuse {
namespace {

using std::chrono::milliseconds;
using Groups = std::vector<std::uint32_t>;

struct Counted {
  int reads = 0;
  Groups groups;
  std::optional<Groups> operator()() {
    ++reads;
    return groups;
  }
};

TEST(Callers, AThreadsGroupsAreReadOncePerSecond) {
  Callers c;
  Counted fetch{0, {10, 20}};
  const auto t0 = Callers::Clock::now();
  auto id = c.of(7, 1000, 100, t0, fetch);
  EXPECT_EQ(id.uid, 1000u);
  EXPECT_EQ(id.gid, 100u);
  EXPECT_EQ(id.groups, (Groups{10, 20}));
  fetch.groups = {30};  // a setgroups() the cache does not see yet
  EXPECT_EQ(c.of(7, 1000, 100, t0 + milliseconds(999), std::ref(fetch)).groups, (Groups{10, 20}));
  EXPECT_EQ(fetch.reads, 1);
  EXPECT_EQ(c.of(7, 1000, 100, t0 + Callers::kKeep, std::ref(fetch)).groups, (Groups{30}));
  EXPECT_EQ(fetch.reads, 2);
}

TEST(Callers, ANewUidOrGidReadsAgain) {
  Callers c;
  Counted fetch{0, {10}};
  const auto t0 = Callers::Clock::now();
  c.of(7, 0, 0, t0, std::ref(fetch));
  fetch.groups = {};
  EXPECT_TRUE(c.of(7, 1000, 0, t0, std::ref(fetch)).groups.empty());  // setuid
  EXPECT_EQ(fetch.reads, 2);
  fetch.groups = {40};
  EXPECT_EQ(c.of(7, 1000, 50, t0, std::ref(fetch)).groups, (Groups{40}));  // setgid
  EXPECT_EQ(fetch.reads, 3);
}

TEST(Callers, AThreadGoneIsSentWithoutGroupsAndNotKept) {
  Callers c;
  int reads = 0;
  auto gone = [&]() -> std::optional<Groups> {
    ++reads;
    return std::nullopt;
  };
  const auto t0 = Callers::Clock::now();
  auto id = c.of(7, 1000, 100, t0, gone);
  EXPECT_EQ(id.uid, 1000u);
  EXPECT_TRUE(id.groups.empty());
  c.of(7, 1000, 100, t0, gone);
  EXPECT_EQ(reads, 2);
}

TEST(Callers, ThreadsSharingASlotTakeItInTurn) {
  Callers c;
  Counted a{0, {1}}, b{0, {2}};
  const auto t0 = Callers::Clock::now();
  const std::uint32_t other = 7 + Callers::kSlots;
  c.of(7, 0, 0, t0, std::ref(a));
  EXPECT_EQ(c.of(other, 0, 0, t0, std::ref(b)).groups, (Groups{2}));
  EXPECT_EQ(c.of(7, 0, 0, t0, std::ref(a)).groups, (Groups{1}));
  EXPECT_EQ(a.reads, 2);  // what it keeps stays kSlots threads' lists, however many call
  EXPECT_EQ(b.reads, 1);
}

}  // namespace
}  // namespace nfsrdma::fuse
