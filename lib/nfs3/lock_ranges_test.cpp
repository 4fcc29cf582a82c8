// RangeSet against the POSIX rules for one owner's locks.
#include "lib/nfs3/lock_ranges.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace nfsrdma::nlm4 {
namespace {

using T = RangeSet::Type;

std::vector<LockRange> all(const RangeSet& s) {
  std::vector<LockRange> v;
  for (const auto& [start, r] : s) v.push_back(r);
  return v;
}

TEST(RangeSet, AnUnlockInTheMiddleSplits) {
  RangeSet s;
  s.apply(0, 99, T::exclusive);
  s.apply(40, 59, T::unlock);
  EXPECT_EQ(all(s), (std::vector<LockRange>{{0, 39, true}, {60, 99, true}}));
}

TEST(RangeSet, ADowngradeInTheMiddleMakesThreeRanges) {
  RangeSet s;
  s.apply(0, 99, T::exclusive);
  s.apply(40, 59, T::shared);
  EXPECT_EQ(all(s), (std::vector<LockRange>{{0, 39, true}, {40, 59, false}, {60, 99, true}}));
  s.apply(40, 59, T::exclusive);  // and back: one range again
  EXPECT_EQ(all(s), (std::vector<LockRange>{{0, 99, true}}));
}

TEST(RangeSet, AdjacentAndOverlappingRangesOfOneTypeMerge) {
  RangeSet s;
  s.apply(10, 19, T::shared);
  s.apply(30, 39, T::shared);
  s.apply(20, 29, T::shared);
  EXPECT_EQ(all(s), (std::vector<LockRange>{{10, 39, false}}));
  s.apply(5, 50, T::shared);
  EXPECT_EQ(all(s), (std::vector<LockRange>{{5, 50, false}}));
  s.apply(51, 60, T::exclusive);  // touching, but of the other type
  EXPECT_EQ(s.size(), 2u);
}

TEST(RangeSet, ToTheEndOfFile) {
  RangeSet s;
  s.apply(100, kEof, T::exclusive);
  s.apply(200, 299, T::unlock);
  EXPECT_EQ(all(s), (std::vector<LockRange>{{100, 199, true}, {300, kEof, true}}));
  s.apply(0, kEof, T::unlock);
  EXPECT_TRUE(s.empty());
}

TEST(RangeSet, Conflicts) {
  RangeSet s;
  s.apply(0, 9, T::shared);
  s.apply(20, 29, T::exclusive);
  EXPECT_FALSE(s.conflict(0, 9, false));
  EXPECT_EQ(s.conflict(5, 5, true), (LockRange{0, 9, false}));
  EXPECT_EQ(s.conflict(15, 25, false), (LockRange{20, 29, true}));
  EXPECT_FALSE(s.conflict(10, 19, true));
  EXPECT_FALSE(s.conflict(30, kEof, true));
}

}  // namespace
}  // namespace nfsrdma::nlm4
