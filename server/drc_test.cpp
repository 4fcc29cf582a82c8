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

}  // namespace
}  // namespace nfsrdma::server
