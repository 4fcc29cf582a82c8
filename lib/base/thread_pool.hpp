// A fixed pool of worker threads running queued jobs in FIFO order, each with
// the one function given at construction. Jobs wait in a ring that keeps its
// room once grown, so in the steady state posting allocates nothing (a queue
// of std::function would allocate per job for any capture bigger than two
// pointers).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace nfsrdma {

template <class Job>
class ThreadPool {
 public:
  ThreadPool(std::size_t threads, std::function<void(Job&&)> run) : run_(std::move(run)), ring_(16) {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { worker(); });
  }
  ~ThreadPool() {  // drains, then joins
    drain();
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void post(Job&& job) {
    {
      std::lock_guard lk(mu_);
      if (queued_ == ring_.size()) grow_locked();
      ring_[(head_ + queued_) % ring_.size()] = std::move(job);
      ++queued_;
    }
    work_cv_.notify_one();
  }
  // Waits until every job posted so far has finished.
  void drain() {
    std::unique_lock lk(mu_);
    idle_cv_.wait(lk, [this] { return queued_ == 0 && busy_ == 0; });
  }
  std::size_t size() const { return threads_.size(); }

 private:
  void grow_locked() {
    std::vector<Job> bigger(ring_.size() * 2);
    for (std::size_t i = 0; i < queued_; ++i) bigger[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_ = std::move(bigger);
    head_ = 0;
  }
  void worker() {
    std::unique_lock lk(mu_);
    for (;;) {
      work_cv_.wait(lk, [this] { return stopping_ || queued_ > 0; });
      if (queued_ == 0) return;  // stopping
      {
        Job job = std::move(ring_[head_]);
        head_ = (head_ + 1) % ring_.size();
        --queued_;
        ++busy_;
        lk.unlock();
        run_(std::move(job));
      }  // ORDER: the job ends before the lock is taken again (it may hold a connection's last reference)
      lk.lock();
      --busy_;
      if (queued_ == 0 && busy_ == 0) idle_cv_.notify_all();
    }
  }

  const std::function<void(Job&&)> run_;
  std::mutex mu_;  // guards ring_, head_, queued_, busy_, stopping_
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::vector<Job> ring_;
  std::size_t head_ = 0, queued_ = 0, busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nfsrdma
