#include "lib/base/loop_inbox.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace nfsrdma {
namespace {

bool readable(const LoopWaker& waker) {
  pollfd p{waker.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(LoopInbox, TakesWhatWasPostedInOrder) {
  LoopWaker waker;
  LoopInbox<int> inbox(waker);
  std::vector<int> got;
  inbox.take(got);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(inbox.empty());
  for (int i = 0; i < 5; ++i) inbox.post(i);
  EXPECT_FALSE(inbox.empty());
  inbox.take(got);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(inbox.empty());
  inbox.post(7);
  inbox.take(got);
  EXPECT_EQ(got, std::vector<int>{7}) << "emptied before it is filled";
}

// A loop that is not sleeping takes its posts at its next turn: posting
// writes no eventfd. One about to sleep is woken, or finds the post in its
// last look.
TEST(LoopInbox, WakesTheLoopOnlyWhileItSleeps) {
  LoopWaker waker;
  LoopInbox<int> inbox(waker), other(waker);
  inbox.post(1);
  waker.wake();
  EXPECT_FALSE(readable(waker)) << "a busy loop";
  waker.sleep_begin();
  EXPECT_FALSE(inbox.empty()) << "something was posted: the loop does not wait";
  waker.sleep_end();
  std::vector<int> got;
  inbox.take(got);
  waker.sleep_begin();
  ASSERT_TRUE(inbox.empty());
  other.post(2);
  EXPECT_TRUE(readable(waker)) << "any inbox of the loop wakes it";
  waker.sleep_end();
  waker.woke();
  EXPECT_FALSE(readable(waker));
  other.take(got);
  EXPECT_EQ(got, std::vector<int>{2});
  waker.sleep_begin();
  waker.wake();
  EXPECT_TRUE(readable(waker)) << "wake() of a sleeping loop";
  waker.sleep_end();
  waker.woke();
  waker.wake_now();
  EXPECT_TRUE(readable(waker)) << "wake_now() whether it sleeps or not";
}

// No post is lost between the loop's last look and its sleep: each of 2,000
// posts waits until the loop took it, so each must wake a loop that sleeps
// (up to 10 s at a time) or find it looking; one lost wake costs 10 s.
TEST(LoopInbox, NoPostWaitsOutTheLoopsSleep) {
  LoopWaker waker;
  LoopInbox<int> inbox(waker);
  constexpr int kPosts = 2000;
  std::atomic<int> taken{0};
  std::thread loop([&] {
    std::vector<int> got;
    while (taken.load() < kPosts) {
      inbox.take(got);
      taken += static_cast<int>(got.size());
      // The loop's own work between its look and its sleep, where the next
      // post lands.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (taken.load() == kPosts) continue;
      waker.sleep_begin();
      if (!inbox.empty()) {
        waker.sleep_end();
        continue;
      }
      pollfd p{waker.fd(), POLLIN, 0};
      const int n = ::poll(&p, 1, 10'000);
      waker.sleep_end();
      if (n == 1) waker.woke();
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= kPosts; ++i) {
    inbox.post(i);
    while (taken.load() < i) std::this_thread::yield();
  }
  loop.join();
  EXPECT_EQ(taken.load(), kPosts);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8)) << "a wake was lost";
}

}  // namespace
}  // namespace nfsrdma
