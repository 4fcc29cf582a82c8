#include "lib/base/fifo.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace nfsrdma {
namespace {

TEST(Fifo, KeepsOrderAcrossReclaims) {
  Fifo<int> q;
  int next_in = 0, next_out = 0;
  // Uneven pushes and pops: the queue empties, and runs long with its head far along.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 7 + round % 5; ++i) q.emplace_back(next_in++);
    for (int i = 0; i < 5 + round % 3 && !q.empty(); ++i) EXPECT_EQ(q.pop_front(), next_out++);
    int expect = next_out;
    for (int v : q) EXPECT_EQ(v, expect++);
    EXPECT_EQ(q.size(), static_cast<std::size_t>(next_in - next_out));
  }
  while (!q.empty()) EXPECT_EQ(q.pop_front(), next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(Fifo, PoppedElementsAreMovedOut) {
  Fifo<std::unique_ptr<int>> q;
  q.emplace_back(std::make_unique<int>(1));
  q.emplace_back(std::make_unique<int>(2));
  auto one = q.pop_front();
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, 1);
  EXPECT_EQ(*q.front(), 2);
}

TEST(Fifo, ReusesItsRoomOnceWarm) {
  Fifo<int> q;
  for (int i = 0; i < 100; ++i) q.emplace_back(i);
  while (!q.empty()) q.pop_front();
  const int* at = &q.emplace_back(0);
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 50; ++i) q.emplace_back(i);
    while (q.size() > 1) q.pop_front();
  }
  q.pop_front();
  EXPECT_EQ(&q.emplace_back(7), at) << "the vector was reallocated in the steady state";
}

}  // namespace
}  // namespace nfsrdma
