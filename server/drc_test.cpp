#include "server/drc.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::server {
namespace {

using Verdict = DuplicateRequestCache::Verdict;

DuplicateRequestCache::Key key(std::uint32_t xid, std::uint64_t sum = 1) {
  DuplicateRequestCache::Key k;
  k.xid = xid;
  k.proc = 12;
  k.checksum = sum;
  return k;
}

TEST(Drc, RetransmissionGetsTheFirstReply) {
  DuplicateRequestCache drc;
  std::vector<std::uint8_t> reply;
  EXPECT_EQ(drc.begin(key(1), reply), Verdict::execute);
  EXPECT_EQ(drc.begin(key(1), reply), Verdict::in_progress);
  drc.finish(key(1), {9, 9});
  EXPECT_EQ(drc.begin(key(1), reply), Verdict::replay);
  EXPECT_EQ(reply, (std::vector<std::uint8_t>{9, 9}));
  EXPECT_EQ(drc.hits(), 1u);
}

TEST(Drc, SameXidDifferentCallIsNew) {
  DuplicateRequestCache drc;
  std::vector<std::uint8_t> reply;
  EXPECT_EQ(drc.begin(key(1, 1), reply), Verdict::execute);
  drc.finish(key(1, 1), {1});
  EXPECT_EQ(drc.begin(key(1, 2), reply), Verdict::execute);
}

TEST(Drc, BoundedAndAbandonable) {
  DuplicateRequestCache drc(4);
  std::vector<std::uint8_t> reply;
  for (std::uint32_t x = 0; x < 10; ++x) {
    EXPECT_EQ(drc.begin(key(x), reply), Verdict::execute);
    drc.finish(key(x), {1});
  }
  EXPECT_EQ(drc.begin(key(0), reply), Verdict::execute);  // evicted long ago
  drc.abandon(key(0));
  EXPECT_EQ(drc.begin(key(0), reply), Verdict::execute);
}

TEST(Drc, ReusedEntriesStartAfresh) {
  DuplicateRequestCache drc(2);
  std::vector<std::uint8_t> reply;
  for (std::uint8_t x = 0; x < 6; ++x) {  // from the third on, evicted entries are reused
    EXPECT_EQ(drc.begin(key(x), reply), Verdict::execute);
    drc.finish(key(x), {x, x, x});
  }
  EXPECT_EQ(drc.begin(key(9), reply), Verdict::execute);
  EXPECT_EQ(drc.begin(key(9), reply), Verdict::in_progress);  // not the old entry's finished state
  drc.finish(key(9), {7});
  EXPECT_EQ(drc.begin(key(9), reply), Verdict::replay);
  EXPECT_EQ(reply, (std::vector<std::uint8_t>{7}));  // not the old entry's bytes
  EXPECT_EQ(drc.begin(key(5), reply), Verdict::replay);
  EXPECT_EQ(reply, (std::vector<std::uint8_t>{5, 5, 5}));
  EXPECT_EQ(drc.begin(key(0), reply), Verdict::execute);  // evicted
}

}  // namespace
}  // namespace nfsrdma::server
