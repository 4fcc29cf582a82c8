// PollScore: when a progress loop polls through its idle spells.
#include "lib/transport/rdma/poll_score.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::rdma {
namespace {

// Idle spells with no call in progress, each ending as found_work says when
// polled through; how many were polled.
int run(PollScore& score, int spells, bool found_work) {
  int polled = 0;
  for (int i = 0; i < spells; ++i) {
    if (!score.begin(false)) continue;
    ++polled;
    EXPECT_TRUE(score.end(found_work));
  }
  return polled;
}

TEST(PollScore, AFreshLoopOnlyProbes) {
  PollScore score;
  EXPECT_EQ(run(score, 320, false), 10);  // one spell in 32
}

TEST(PollScore, CallsThatComeWhileItPollsKeepItPolling) {
  PollScore score;
  EXPECT_EQ(run(score, 31, true), 0);
  EXPECT_EQ(run(score, 500, true), 500);  // the first probe found work, and each after it
}

TEST(PollScore, MissesCountTwiceHits) {
  PollScore score;
  run(score, 32 * 8, true);  // the score at its most, 8
  // Hit, miss, miss: +1 -2 -2 a round, so polling stops within a few rounds.
  int polled = 0;
  for (int round = 0; round < 10; ++round) {
    for (bool work : {true, false, false}) {
      if (!score.begin(false)) continue;
      ++polled;
      score.end(work);
    }
  }
  EXPECT_LE(polled, 3 * 3 + 1);
  // Polling stopped, but one spell in 32 still looks whether it would pay.
  EXPECT_EQ(run(score, 64, false), 2);
}

TEST(PollScore, MoreHitsThanTwiceTheMissesKeepItPolling) {
  PollScore score;
  run(score, 32, true);
  int polled = 0;
  for (int round = 0; round < 100; ++round) {
    for (bool work : {true, true, true, false}) {
      if (!score.begin(false)) continue;
      ++polled;
      score.end(work);
    }
  }
  EXPECT_EQ(polled, 400);
}

TEST(PollScore, SpellsWithACallInProgressArePolledAndNotScored) {
  PollScore score;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(score.begin(true));
    EXPECT_FALSE(score.end(i % 2 == 0));
  }
  EXPECT_EQ(run(score, 31, false), 0);  // still a fresh loop's: probes only
}

}  // namespace
}  // namespace nfsrdma::rdma
