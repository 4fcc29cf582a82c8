// PayloadPool: every lease is served, however leases and gives interleave
// across threads (a lost wakeup here stalled a kernel client's nconnect=4
// mount: a waiter stayed queued while the slot it needed sat in the pool);
// an account past its cap waits for its own slots, accounts take turns, and
// a closed account's leases are dropped.
#include "lib/transport/rdma/buffers.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace nfsrdma::rdma {
namespace {

// A pool of `count` slots in a tcp-provider domain; null, with the reason
// reported, when there is none.
std::unique_ptr<PayloadPool> make_pool(std::size_t count) {
  auto info = fabric::get_info("tcp", "127.0.0.1", "0", true);
  if (!info) {
    ADD_FAILURE() << info.error().describe();
    return nullptr;
  }
  static auto domain = fabric::Domain::open(info->get());
  if (!domain) {
    ADD_FAILURE() << domain.error().describe();
    return nullptr;
  }
  auto slots = SlotPool::create(**domain, count, 4096, false);
  if (!slots) {
    ADD_FAILURE() << slots.error().describe();
    return nullptr;
  }
  return std::make_unique<PayloadPool>(std::move(*slots));
}

TEST(PayloadPool, EveryLeaseIsServedUnderContention) {
  auto owned = make_pool(2);
  ASSERT_TRUE(owned);
  PayloadPool& pool = *owned;
  PayloadPool::Account account(1000000);
  constexpr int kThreads = 3, kLeases = 50000;
  std::atomic<int> served{0};
  // Leases from some threads; the slots go back from others, as requests
  // finish on other connections' threads, so gives race leases.
  std::mutex mu;
  std::vector<std::size_t> held;
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kLeases; ++i) {
        pool.lease(account, [&](std::size_t slot) {
          served.fetch_add(1);
          std::lock_guard lk(mu);
          held.push_back(slot);
        });
      }
    });
  }
  std::thread giver([&] {
    while (!done || !held.empty()) {
      std::optional<std::size_t> slot;
      {
        std::lock_guard lk(mu);
        if (!held.empty()) {
          slot = held.back();
          held.pop_back();
        }
      }
      if (slot) pool.give(account, *slot);
    }
  });
  for (auto& t : threads) t.join();
  // Whatever is still queued is served by the gives still to come, if none was lost.
  for (int i = 0; i < 1000 && served.load() < kThreads * kLeases; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  done = true;
  giver.join();
  EXPECT_EQ(served.load(), kThreads * kLeases) << "leases left waiting with slots free";
  EXPECT_EQ(pool.slots().available(), 2u);
}

// Leases as they are served, in order, each marked by who asked.
struct Served {
  std::vector<std::pair<char, std::size_t>> order;
  std::function<void(std::size_t)> by(char who) {
    return [this, who](std::size_t slot) { order.emplace_back(who, slot); };
  }
};

TEST(PayloadPool, AnAccountAtItsCapWaitsForItsOwnSlotsThoughOthersAreFree) {
  auto pool = make_pool(8);
  ASSERT_TRUE(pool);
  PayloadPool::Account a(2);
  Served s;
  for (int i = 0; i < 3; ++i) pool->lease(a, s.by('a'));
  ASSERT_EQ(s.order.size(), 2u);
  EXPECT_FALSE(pool->try_take(a));
  EXPECT_EQ(pool->slots().available(), 6u);
  pool->give(a, s.order[0].second);  // its own slot back: its third lease goes on, with it
  ASSERT_EQ(s.order.size(), 3u);
  EXPECT_EQ(s.order[2].second, s.order[0].second);
  PayloadPool::Account b(2);
  EXPECT_TRUE(pool->try_take(b));  // another account is not held up by a's cap
}

TEST(PayloadPool, AccountsWaitingForSlotsTakeTurns) {
  auto pool = make_pool(1);
  ASSERT_TRUE(pool);
  PayloadPool::Account a(4), b(4);
  Served s;
  for (int i = 0; i < 3; ++i) pool->lease(a, s.by('a'));  // one served, two wait
  pool->lease(b, s.by('b'));                                // waits behind a's first
  EXPECT_FALSE(pool->try_take(b));
  ASSERT_EQ(s.order.size(), 1u);
  const std::size_t slot = s.order[0].second;
  pool->give(a, slot);  // a's turn: its second lease; then b's before a's third
  pool->give(a, slot);
  pool->give(b, slot);
  std::string who;
  for (auto& [w, _] : s.order) who += w;
  EXPECT_EQ(who, "aaba");
  pool->give(a, slot);
  EXPECT_EQ(pool->slots().available(), 1u);
}

TEST(PayloadPool, AClosedAccountsLeasesAreDroppedAndItsSlotsComeBack) {
  auto pool = make_pool(1);
  ASSERT_TRUE(pool);
  PayloadPool::Account a(4), b(4);
  Served s;
  pool->lease(a, s.by('a'));
  auto owner = std::make_shared<int>(0);  // what a waiting lease keeps alive
  pool->lease(a, [owner, &s](std::size_t slot) { s.order.emplace_back('x', slot); });
  pool->lease(b, s.by('b'));
  pool->close(a);
  EXPECT_EQ(owner.use_count(), 1) << "the closed account's lease was kept";
  pool->lease(a, s.by('x'));  // after close: dropped
  pool->give(a, s.order[0].second);  // goes to b, not to a's dropped leases
  std::string who;
  for (auto& [w, _] : s.order) who += w;
  EXPECT_EQ(who, "ab");
  pool->give(b, s.order[1].second);
  EXPECT_EQ(pool->slots().available(), 1u);
}

// Connections with small caps lease and give back from threads of their
// own, and one closes midway: every lease of an open account is served, and
// every slot comes back.
TEST(PayloadPool, CappedAccountsUnderContentionServeEveryLeaseAndLoseNoSlot) {
  auto pool = make_pool(4);
  ASSERT_TRUE(pool);
  constexpr int kAccounts = 3, kLeases = 20000, kClosed = 2;
  std::vector<std::unique_ptr<PayloadPool::Account>> accounts;
  for (int i = 0; i < kAccounts; ++i) accounts.push_back(std::make_unique<PayloadPool::Account>(2));
  std::atomic<int> served[kAccounts] = {};
  std::mutex mu;
  std::vector<std::pair<int, std::size_t>> held;  // (account, slot) to give back
  std::atomic<int> leasing{kAccounts};
  std::vector<std::thread> threads;
  for (int a = 0; a < kAccounts; ++a) {
    threads.emplace_back([&, a] {
      for (int i = 0; i < kLeases; ++i) {
        if (a == kClosed && i == kLeases / 2) pool->close(*accounts[a]);
        pool->lease(*accounts[a], [&, a](std::size_t slot) {
          served[a].fetch_add(1);
          std::lock_guard lk(mu);
          held.emplace_back(a, slot);
        });
      }
      leasing.fetch_sub(1);
    });
  }
  std::thread giver([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<std::pair<int, std::size_t>> one;
      bool idle;
      {
        std::lock_guard lk(mu);
        if (!held.empty()) {
          one = held.back();
          held.pop_back();
        }
        idle = held.empty() && leasing.load() == 0;
      }
      if (one) pool->give(*accounts[one->first], one->second);
      if (!one && idle && served[0].load() == kLeases && served[1].load() == kLeases) return;
    }
  });
  for (auto& t : threads) t.join();
  giver.join();
  EXPECT_EQ(served[0].load(), kLeases);
  EXPECT_EQ(served[1].load(), kLeases);
  EXPECT_LE(served[kClosed].load(), kLeases / 2);
  EXPECT_EQ(pool->slots().available(), 4u) << "a slot was lost";
}

}  // namespace
}  // namespace nfsrdma::rdma
