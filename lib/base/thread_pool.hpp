// A fixed pool of worker threads running queued tasks in FIFO order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nfsrdma {

class ThreadPool {
 public:
  explicit ThreadPool(std::size_t threads);
  ~ThreadPool();  // drains, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void post(std::function<void()> task);
  // Waits until every task posted so far has finished.
  void drain();
  std::size_t size() const { return threads_.size(); }

 private:
  void worker();

  std::mutex mu_;  // guards queue_, busy_, stopping_
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> queue_;
  std::size_t busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nfsrdma
