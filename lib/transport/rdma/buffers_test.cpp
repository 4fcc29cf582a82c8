// PayloadPool: every lease is served, however leases and gives interleave
// across threads (a lost wakeup here stalled a kernel client's nconnect=4
// mount: a waiter stayed queued while the slot it needed sat in the pool).
#include "lib/transport/rdma/buffers.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace nfsrdma::rdma {
namespace {

TEST(PayloadPool, EveryLeaseIsServedUnderContention) {
  auto domain_info = fabric::get_info("tcp", "127.0.0.1", "0", true);
  ASSERT_TRUE(domain_info.ok()) << domain_info.error().describe();
  auto domain = fabric::Domain::open(domain_info->get());
  ASSERT_TRUE(domain.ok()) << domain.error().describe();
  auto slots = SlotPool::create(**domain, 2, 4096, false);
  ASSERT_TRUE(slots.ok()) << slots.error().describe();
  PayloadPool pool(std::move(*slots));
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
        pool.lease([&](std::size_t slot) {
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
      if (slot) pool.give(*slot);
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

}  // namespace
}  // namespace nfsrdma::rdma
