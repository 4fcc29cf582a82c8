// How other threads hand work to an event loop's thread (event_loop.hpp),
// and wake it: LoopWaker is the loop's one eventfd and its "sleeping" flag;
// each LoopInbox<T> is a queue of one kind of work (a connection to take
// over, close or look at again) that wakes the loop through it. The loop
// waits in epoll with the waker's fd() in its set; post() and wake() write
// that eventfd only while the loop sleeps or is about to, so a busy loop
// costs its posters a mutex and no syscall.
//
// ORDER: the loop stores `sleeping_` (sleep_begin), then reads each inbox's
// `has_` and whatever else it waits for; a poster stores `has_` (or its own
// work), then reads `sleeping_` (wake). Both are sequentially consistent, so
// work handed over meanwhile is either seen before the loop sleeps or wakes
// it. A flag the loop reads only before sleep_begin (stopping) needs
// wake_now().
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/base/fd.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma {

class LoopWaker {
 public:
  LoopWaker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) { NFSRDMA_CHECK(fd_.valid()); }
  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;

  // For the loop's epoll set: readable once woken; the loop then calls woke().
  int fd() const { return fd_.get(); }

  // ---- any thread ----
  // The loop looks at its work again, if it sleeps: for work it checks after
  // sleep_begin (posts; the RDMA connections' own inboxes).
  void wake() {
    if (sleeping_.load()) wake_now();
  }
  // Whether it sleeps or not: for a flag read before sleep_begin.
  void wake_now() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd_.get(), &one, sizeof one);  // full only after 2^64-1 wakes
  }

  // ---- the loop's thread ----
  // Before the loop looks at its work a last time and waits: from here on
  // wake() writes fd().
  void sleep_begin() { sleeping_.store(true); }
  // After the wait, or when the last look found work.
  void sleep_end() { sleeping_.store(false, std::memory_order_relaxed); }
  // epoll reported fd(): reads it, so the next wait blocks.
  void woke() {
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(fd_.get(), &count, sizeof count);
  }

 private:
  Fd fd_;
  std::atomic<bool> sleeping_{false};
};

template <class T>
class LoopInbox {
 public:
  explicit LoopInbox(LoopWaker& waker) : waker_(waker) {}
  LoopInbox(const LoopInbox&) = delete;
  LoopInbox& operator=(const LoopInbox&) = delete;

  // Any thread.
  void post(T item) {
    {
      std::lock_guard lk(mu_);
      items_.push_back(std::move(item));
      has_.store(true);
    }
    waker_.wake();
  }

  // ---- the loop's thread ----
  // Sequentially consistent: after sleep_begin, the last look before a wait.
  bool empty() const { return !has_.load(); }
  // What was posted, in order, into `out` (emptied first; the two vectors
  // trade their room, so a loop that keeps `out` allocates nothing).
  void take(std::vector<T>& out) {
    out.clear();
    if (!has_.load(std::memory_order_relaxed)) return;
    std::lock_guard lk(mu_);
    out.swap(items_);
    has_.store(false, std::memory_order_relaxed);
  }

 private:
  LoopWaker& waker_;
  std::mutex mu_;  // guards items_
  std::vector<T> items_;
  std::atomic<bool> has_{false};
};

}  // namespace nfsrdma
