#include "client/fuse/buffer_pool.hpp"

#include "lib/base/result.hpp"

namespace nfsrdma::fuse {

BufferPool::BufferPool(std::size_t chunk_bytes, std::size_t chunks) : chunk_(chunk_bytes), count_(chunks) {
  auto m = Mapping::anonymous(chunk_ * count_, true);
  NFSRDMA_CHECK(m.ok());
  memory_ = std::move(*m);
  base_ = memory_.data();
  for (std::size_t i = count_; i-- > 0;) free_.push_back(base_ + i * chunk_);
}

std::uint8_t* BufferPool::acquire(const std::function<void()>& starved) {
  std::unique_lock lk(mu_);
  if (free_.empty() && starved) {
    lk.unlock();
    starved();
    lk.lock();
  }
  cv_.wait(lk, [&] { return !free_.empty(); });
  auto* c = free_.back();
  free_.pop_back();
  return c;
}

bool BufferPool::running_low() {
  std::lock_guard lk(mu_);
  return free_.size() < count_ / 4;
}

void BufferPool::release(std::uint8_t* chunk) {
  NFSRDMA_CHECK(chunk >= base_ && chunk < base_ + chunk_ * count_);
  {
    std::lock_guard lk(mu_);
    free_.push_back(chunk);
  }
  cv_.notify_one();
}

}  // namespace nfsrdma::fuse
