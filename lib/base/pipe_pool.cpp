#include "lib/base/pipe_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace nfsrdma {

namespace {
// A pipe with `capacity` asked for; what it got, 0 when no pipe.
std::size_t make_pipe(std::size_t capacity, Fd& r, Fd& w) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return 0;
  r = Fd(fds[0]);
  w = Fd(fds[1]);
  // Above pipe-max-size (1 MiB by default) without CAP_SYS_RESOURCE: EPERM,
  // so halved until taken.
  for (std::size_t ask = capacity; ask > 4096; ask /= 2) {
    if (::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(ask)) >= 0) break;
  }
  int got = ::fcntl(fds[1], F_GETPIPE_SZ);
  return got > 0 ? static_cast<std::size_t>(got) : 0;
}
}  // namespace

PipePool::PipePool(std::size_t max_pipes, std::size_t capacity) : max_pipes_(max_pipes) {
  // The first pipe says what capacity every one gets (they are made alike).
  Fd r, w;
  capacity_ = make_pipe(capacity, r, w);
  if (capacity_ > 0 && max_pipes_ > 0) idle_.emplace_back(std::move(r), std::move(w));
}

PipePool::Pipe PipePool::take() {
  Pipe p;
  {
    std::lock_guard lk(mu_);
    if (capacity_ == 0 || lent_ >= max_pipes_) return p;
    ++lent_;
    if (!idle_.empty()) {
      p.read_ = std::move(idle_.back().first);
      p.write_ = std::move(idle_.back().second);
      idle_.pop_back();
      p.pool_ = this;
      return p;
    }
  }
  // A new one, made outside the lock; one smaller than the rest is not used.
  if (make_pipe(capacity_, p.read_, p.write_) < capacity_) {
    p.read_.reset();
    p.write_.reset();
    std::lock_guard lk(mu_);
    --lent_;
    return p;
  }
  p.pool_ = this;
  return p;
}

std::size_t PipePool::lent() {
  std::lock_guard lk(mu_);
  return lent_;
}

void PipePool::Pipe::give_back() {
  if (!pool_) return;
  PipePool* pool = std::exchange(pool_, nullptr);
  std::lock_guard lk(pool->mu_);
  --pool->lent_;
  if (held_ == 0 && read_.valid()) pool->idle_.emplace_back(std::move(read_), std::move(write_));
  read_.reset();
  write_.reset();
  held_ = 0;
}

}  // namespace nfsrdma
