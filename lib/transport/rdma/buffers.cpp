#include "lib/transport/rdma/buffers.hpp"

#include <algorithm>

#include "lib/base/metrics.hpp"

namespace nfsrdma::rdma {

Result<std::unique_ptr<SlotPool>> SlotPool::create(fabric::Domain& domain, std::size_t count, std::size_t slot_bytes,
                                                   bool remote, std::size_t registered) {
  std::unique_ptr<SlotPool> p(new SlotPool);
  auto memory = Mapping::anonymous(count * slot_bytes);
  if (!memory) return memory.error();
  p->memory_ = std::move(*memory);
  p->slot_bytes_ = slot_bytes;
  p->count_ = count;
  p->remote_ = remote;
  if (auto r = p->grow(domain, std::min(registered, count)); !r) return r.error();
  return p;
}

Result<void> SlotPool::grow(fabric::Domain& domain, std::size_t n) {
  n = std::min(n, count_ - registered_);
  if (n == 0) return {};
  auto mr = domain.register_memory(memory_.data() + registered_ * slot_bytes_, n * slot_bytes_, remote_);
  if (!mr) return mr.error();
  tiers_.emplace_back(registered_, std::move(*mr));
  std::lock_guard lk(mu_);
  // Lowest first out: free_ is taken from the back.
  free_.insert(free_.begin(), n, 0);
  for (std::size_t i = 0; i < n; ++i) free_[i] = registered_ + n - 1 - i;
  registered_ += n;
  return {};
}

const fabric::MemoryRegion& SlotPool::region(std::size_t slot) const {
  NFSRDMA_CHECK(slot < registered_);
  auto it = std::upper_bound(tiers_.begin(), tiers_.end(), slot,
                             [](std::size_t s, const auto& tier) { return s < tier.first; });
  return std::prev(it)->second;
}

std::optional<std::size_t> SlotPool::take() {
  std::lock_guard lk(mu_);
  if (free_.empty()) return std::nullopt;
  std::size_t s = free_.back();
  free_.pop_back();
  return s;
}

void SlotPool::give(std::size_t slot) {
  std::lock_guard lk(mu_);
  NFSRDMA_CHECK(slot < count_);
  free_.push_back(slot);
}

std::size_t SlotPool::available() {
  std::lock_guard lk(mu_);
  return free_.size();
}

void PayloadPool::queue_turn(Account& a) {
  if (a.in_turns_ || !may_take_turn(a)) return;
  turns_.push_back(&a);
  a.in_turns_ = true;
}

void PayloadPool::lease(Account& a, std::function<void(std::size_t)> then) {
  std::optional<std::size_t> slot;
  {
    // The pool is consulted under mu_, as give() does: otherwise a slot given
    // back while this one queues lands in the pool with a waiter left behind.
    std::lock_guard lk(mu_);
    if (a.closed_) return;
    if (a.waiting_.empty() && a.held_ < a.cap_ && turns_.empty()) slot = pool_->take();
    if (!slot) {
      a.waiting_.push_back(std::move(then));
      queue_turn(a);
      return;
    }
    ++a.held_;
  }
  then(*slot);
}

std::optional<std::size_t> PayloadPool::try_take(Account& a) {
  std::lock_guard lk(mu_);
  if (a.closed_ || !a.waiting_.empty() || a.held_ >= a.cap_ || !turns_.empty()) return std::nullopt;
  auto slot = pool_->take();
  if (slot) ++a.held_;
  return slot;
}

void PayloadPool::give(Account& a, std::size_t slot) {
  std::function<void(std::size_t)> next;
  {
    std::lock_guard lk(mu_);
    --a.held_;
    queue_turn(a);  // back under its cap, with a lease waiting
    if (turns_.empty()) {
      pool_->give(slot);
      return;
    }
    Account& t = *turns_.front();
    turns_.pop_front();
    t.in_turns_ = false;
    next = std::move(t.waiting_.front());
    t.waiting_.pop_front();
    ++t.held_;
    queue_turn(t);  // its next lease waits behind the other accounts'
  }
  next(slot);
}

void PayloadPool::close(Account& a) {
  std::deque<std::function<void(std::size_t)>> dropped;
  {
    std::lock_guard lk(mu_);
    a.closed_ = true;
    dropped.swap(a.waiting_);
    if (a.in_turns_) {
      turns_.erase(std::find(turns_.begin(), turns_.end(), &a));
      a.in_turns_ = false;
    }
  }
}

std::size_t count_chunk_ops(std::size_t len, std::span<const rpcrdma::Segment> segments, std::size_t max_op) {
  std::size_t ops = 0, done = 0;
  max_op = std::max<std::size_t>(max_op, 4096);
  for (const auto& seg : segments) {
    std::size_t in_segment = 0;
    while (done < len && in_segment < seg.length) {
      std::size_t n = std::min({len - done, std::size_t{seg.length} - in_segment, max_op});
      ++ops;
      done += n;
      in_segment += n;
    }
  }
  return ops;
}

Result<std::size_t> post_chunk_rma(fabric::Endpoint& ep, fabric::OpContext* ctx, bool write, std::uint8_t* local,
                                   std::size_t len, void* desc, std::span<const rpcrdma::Segment> segments,
                                   bool signalled, std::size_t first, std::size_t max_ops) {
  std::size_t op = 0, done = 0, posted = 0, bytes = 0;
  const std::size_t max_op = std::max<std::size_t>(ep.max_rma_bytes(), 4096);
  bool full = false;
  for (const auto& seg : segments) {
    std::size_t in_segment = 0;
    while (done < len && in_segment < seg.length && !full) {
      std::size_t n = std::min({len - done, std::size_t{seg.length} - in_segment, max_op});
      if (op >= first) {
        if (posted == max_ops) {
          full = true;
          break;
        }
        std::uint64_t remote = seg.offset + in_segment;
        auto r = write ? ep.post_write(ctx, local + done, n, desc, remote, seg.handle, signalled)
                       : ep.post_read(ctx, local + done, n, desc, remote, seg.handle);
        if (!r) {
          if (r.error().action != Action::retry_now) return r.error();
          full = true;  // FI_EAGAIN: the send queue is full
          break;
        }
        ++posted;
        bytes += n;
      }
      ++op;
      done += n;
      in_segment += n;
    }
    if (done == len || full) break;
  }
  if (!full && done < len) return Error{ErrorDomain::rpc, 0, Action::fail, "rpcrdma: chunk smaller than its data"};
  static auto& r = metrics::registry();
  static metrics::Counter* ops[2] = {
      &r.counter("nfsrdma_rdma_ops_total", "RDMA Reads and Writes posted (chunk data)", {{"op", "read"}}),
      &r.counter("nfsrdma_rdma_ops_total", "RDMA Reads and Writes posted (chunk data)", {{"op", "write"}})};
  static metrics::Counter* moved[2] = {
      &r.counter("nfsrdma_rdma_bytes_total", "Bytes moved by RDMA Read and Write", {{"op", "read"}}),
      &r.counter("nfsrdma_rdma_bytes_total", "Bytes moved by RDMA Read and Write", {{"op", "write"}})};
  ops[write]->inc(posted);
  moved[write]->inc(bytes);
  return first + posted;
}

}  // namespace nfsrdma::rdma
