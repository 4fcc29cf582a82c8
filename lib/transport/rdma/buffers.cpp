#include "lib/transport/rdma/buffers.hpp"

#include <algorithm>

#include "lib/base/metrics.hpp"

namespace nfsrdma::rdma {

Result<std::unique_ptr<SlotPool>> SlotPool::create(fabric::Domain& domain, std::size_t count, std::size_t slot_bytes,
                                                   bool remote) {
  std::unique_ptr<SlotPool> p(new SlotPool);
  auto memory = Mapping::anonymous(count * slot_bytes);
  if (!memory) return memory.error();
  p->memory_ = std::move(*memory);
  p->slot_bytes_ = slot_bytes;
  p->count_ = count;
  auto mr = domain.register_memory(p->memory_.data(), count * slot_bytes, remote);
  if (!mr) return mr.error();
  p->mr_ = std::move(*mr);
  for (std::size_t i = count; i > 0; --i) p->free_.push_back(i - 1);
  return p;
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

void PayloadPool::lease(std::function<void(std::size_t)> then) {
  std::optional<std::size_t> slot;
  {
    // The pool is consulted under mu_, as give() does: otherwise a slot given
    // back while this one queues lands in the pool with a waiter left behind.
    std::lock_guard lk(mu_);
    if (waiters_.empty()) slot = pool_->take();
    if (!slot) {
      waiters_.push_back(std::move(then));
      return;
    }
  }
  then(*slot);
}

std::optional<std::size_t> PayloadPool::try_take() {
  std::lock_guard lk(mu_);
  if (!waiters_.empty()) return std::nullopt;
  return pool_->take();
}

void PayloadPool::give(std::size_t slot) {
  std::function<void(std::size_t)> next;
  {
    std::lock_guard lk(mu_);
    if (waiters_.empty()) {
      pool_->give(slot);
      return;
    }
    next = std::move(waiters_.front());
    waiters_.pop_front();
  }
  next(slot);
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
                                   bool signalled) {
  std::size_t posted = 0, done = 0;
  const std::size_t max_op = std::max<std::size_t>(ep.max_rma_bytes(), 4096);
  for (const auto& seg : segments) {
    std::size_t in_segment = 0;
    while (done < len && in_segment < seg.length) {
      std::size_t n = std::min({len - done, std::size_t{seg.length} - in_segment, max_op});
      std::uint64_t remote = seg.offset + in_segment;
      auto r = write ? ep.post_write(ctx, local + done, n, desc, remote, seg.handle, signalled)
                     : ep.post_read(ctx, local + done, n, desc, remote, seg.handle);
      if (!r) return r.error();
      ++posted;
      done += n;
      in_segment += n;
    }
    if (done == len) break;
  }
  if (done < len) return Error{ErrorDomain::rpc, 0, Action::fail, "rpcrdma: chunk smaller than its data"};
  static auto& r = metrics::registry();
  static metrics::Counter* ops[2] = {
      &r.counter("nfsrdma_rdma_ops_total", "RDMA Reads and Writes posted (chunk data)", {{"op", "read"}}),
      &r.counter("nfsrdma_rdma_ops_total", "RDMA Reads and Writes posted (chunk data)", {{"op", "write"}})};
  static metrics::Counter* bytes[2] = {
      &r.counter("nfsrdma_rdma_bytes_total", "Bytes moved by RDMA Read and Write", {{"op", "read"}}),
      &r.counter("nfsrdma_rdma_bytes_total", "Bytes moved by RDMA Read and Write", {{"op", "write"}})};
  ops[write]->inc(posted);
  bytes[write]->inc(len);
  return posted;
}

}  // namespace nfsrdma::rdma
