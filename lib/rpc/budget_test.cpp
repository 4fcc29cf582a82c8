#include "lib/rpc/budget.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace nfsrdma::rpc {
namespace {

Address addr(std::uint8_t last) {
  Address a{};
  a[15] = last;
  return a;
}

TEST(MemoryBudget, RefusesPastTheLimitAndPastAnAddressesShare) {
  MemoryBudget b(1000, 400);
  EXPECT_TRUE(b.try_charge(MemoryBudget::tcp_calls, addr(1), 400));
  EXPECT_FALSE(b.try_charge(MemoryBudget::tcp_calls, addr(1), 1)) << "one address took more than its share";
  EXPECT_TRUE(b.try_charge(MemoryBudget::tcp_calls, addr(2), 400));
  EXPECT_FALSE(b.try_charge(MemoryBudget::rdma_connections, addr(3), 201)) << "past the limit";
  EXPECT_TRUE(b.try_charge(MemoryBudget::rdma_connections, addr(3), 200));
  EXPECT_EQ(b.used(), 1000u);
  EXPECT_FALSE(b.room(addr(4), 1));
  b.release(MemoryBudget::tcp_calls, addr(1), 400);
  EXPECT_EQ(b.used_by(addr(1)), 0u);
  EXPECT_TRUE(b.room(addr(4), 400));
  EXPECT_FALSE(b.room(addr(4), 401));
}

TEST(MemoryBudget, WhatIsAlreadyHeldIsCountedEvenPastTheLimit) {
  MemoryBudget b(100, 100);
  b.charge(MemoryBudget::drc, addr(0), 150);
  EXPECT_EQ(b.used(), 150u);
  EXPECT_FALSE(b.try_charge(MemoryBudget::mount, addr(1), 1));
  b.release(MemoryBudget::drc, addr(0), 150);
  EXPECT_TRUE(b.try_charge(MemoryBudget::mount, addr(1), 1));
}

TEST(MemoryBudget, AReleaseWakesOnlyWhenItMakesRoomForAWaiter) {
  MemoryBudget b(100, 60);
  int woken = 0;
  b.on_room([&] { ++woken; });
  ASSERT_TRUE(b.try_charge(MemoryBudget::tcp_records, addr(1), 60));
  ASSERT_TRUE(b.try_charge(MemoryBudget::tcp_records, addr(2), 30));
  b.release(MemoryBudget::tcp_records, addr(2), 10);
  EXPECT_EQ(woken, 0) << "woken with nobody waiting";
  EXPECT_TRUE(b.wait(MemoryBudget::tcp_calls, addr(1), 20));  // at its share
  EXPECT_FALSE(b.wait(MemoryBudget::tcp_calls, addr(3), 20)) << "there is room for another address";
  ASSERT_TRUE(b.try_charge(MemoryBudget::tcp_records, addr(2), 10));
  b.release(MemoryBudget::tcp_records, addr(2), 30);
  EXPECT_EQ(woken, 0) << "another address's release gave the waiter no room";
  b.release(MemoryBudget::tcp_records, addr(1), 30);
  EXPECT_EQ(woken, 1);
  b.release(MemoryBudget::tcp_records, addr(1), 10);
  EXPECT_EQ(woken, 1) << "woken again without a new wait()";
}

// A transport forgets its waker before it goes: a release on another thread
// that is running the waker then must finish before forget() returns.
TEST(MemoryBudget, AForgottenWakerNeverRunsAfterForgetReturns) {
  MemoryBudget b(100, 60);
  std::atomic<bool> started{false}, finished{false};
  const auto id = b.on_room([&] {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = true;
  });
  ASSERT_TRUE(b.try_charge(MemoryBudget::tcp_records, addr(1), 60));
  ASSERT_TRUE(b.wait(MemoryBudget::tcp_calls, addr(1), 20));
  std::thread releaser([&] { b.release(MemoryBudget::tcp_records, addr(1), 60); });
  while (!started) std::this_thread::yield();
  b.forget(id);
  EXPECT_TRUE(finished) << "forget() returned while the waker still ran";
  releaser.join();
}

}  // namespace
}  // namespace nfsrdma::rpc
