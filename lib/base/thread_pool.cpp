#include "lib/base/thread_pool.hpp"

namespace nfsrdma {

ThreadPool::ThreadPool(std::size_t threads) {
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  drain();
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::post(std::function<void()> task) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void ThreadPool::drain() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [this] { return queue_.empty() && busy_ == 0; });
}

void ThreadPool::worker() {
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    auto task = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lk.unlock();
    task();
    task = nullptr;
    lk.lock();
    --busy_;
    if (queue_.empty() && busy_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace nfsrdma
