// Registered memory for one side of RPC-over-RDMA, allocated and registered
// once (at connect or listen), never per I/O: fixed-size slots handed out by
// index. Running out is a state to wait in, not an error (SPDK style): the
// caller queues its work until a slot comes back.
#pragma once

#include <cstdint>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <memory>
#include <vector>

#include "lib/base/mapping.hpp"
#include "lib/fabric/fabric.hpp"
#include "lib/rpcrdma/header.hpp"

namespace nfsrdma::rdma {

// Registered in tiers: `create` registers the first slots, grow() the next
// ones (a connection's buffers grow with its credits), each tier a memory
// region of its own, so a slot's descriptor and key are its tier's.
class SlotPool {
 public:
  // `count` slots of `slot_bytes`, the first `registered` of them (all, by
  // default) registered in `domain` now; `remote`: the peer may RDMA Read and
  // Write them (payload pools), else local only (send/recv).
  static Result<std::unique_ptr<SlotPool>> create(fabric::Domain& domain, std::size_t count, std::size_t slot_bytes,
                                                   bool remote, std::size_t registered = SIZE_MAX);
  // Registers `n` more slots (at most up to count()) and makes them free.
  // Not thread-safe against itself or region(); take/give may run meanwhile.
  Result<void> grow(fabric::Domain& domain, std::size_t n);

  std::optional<std::size_t> take();  // thread-safe
  void give(std::size_t slot);         // thread-safe

  std::span<std::uint8_t> slot(std::size_t i) { return {memory_.data() + i * slot_bytes_, slot_bytes_}; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::size_t count() const { return count_; }
  std::size_t available();
  const fabric::MemoryRegion& region(std::size_t slot) const;
  void* desc(std::size_t slot) const { return region(slot).desc(); }

 private:
  SlotPool() = default;
  // Its pages are touched only when used (or pinned by providers that pin at
  // registration: only the tiers registered).
  Mapping memory_;
  bool remote_ = false;
  std::vector<std::pair<std::size_t, fabric::MemoryRegion>> tiers_;  // (first slot, its region)
  std::size_t slot_bytes_ = 0, count_ = 0, registered_ = 0;
  std::mutex mu_;  // guards free_
  std::vector<std::size_t> free_;
};

// A SlotPool shared by a device's connections, whose takers can wait: lease()
// runs `then` with a slot now, or later from whichever thread gives one back.
// Each taker has an Account: at most `cap` slots held or on their way at once,
// so the RMAs of one client that stalls them cannot hold every buffer. One
// queue of waiters: an account's leases wait in its own order, and accounts
// with a lease waiting and room under their cap take turns for the slots
// given back, one lease a turn.
class PayloadPool {
 public:
  class Account {
   public:
    explicit Account(std::size_t cap) : cap_(cap) {}
    Account(const Account&) = delete;
    Account& operator=(const Account&) = delete;

   private:
    friend class PayloadPool;
    const std::size_t cap_;
    std::size_t held_ = 0;  // slots held or handed to its leases
    std::deque<std::function<void(std::size_t)>> waiting_;
    bool in_turns_ = false;  // in the pool's turns_
    bool closed_ = false;
  };

  explicit PayloadPool(std::unique_ptr<SlotPool> pool) : pool_(std::move(pool)) {}
  void lease(Account& a, std::function<void(std::size_t)> then);
  // A slot now if one is free, `a` is under its cap and no lease waits (lease()
  // without a waiter to make).
  std::optional<std::size_t> try_take(Account& a);
  void give(Account& a, std::size_t slot);
  // `a` leases no more: its waiting leases are dropped (destroyed outside the
  // pool's lock: they may hold the last reference to its owner, which the
  // caller must hold meanwhile). The slots it holds still come back by give().
  void close(Account& a);
  SlotPool& slots() { return *pool_; }

 private:
  static bool may_take_turn(const Account& a) { return !a.closed_ && !a.waiting_.empty() && a.held_ < a.cap_; }
  void queue_turn(Account& a);  // with mu_ held

  std::unique_ptr<SlotPool> pool_;
  std::mutex mu_;  // guards every Account and turns_, and with them taking from and giving to pool_ (ORDER: before pool_'s)
  std::deque<Account*> turns_;  // accounts whose first lease waits for a slot, in turn
};

// How many RMA operations post_chunk_rma will post for `len` bytes.
std::size_t count_chunk_ops(std::size_t len, std::span<const rpcrdma::Segment> segments, std::size_t max_op);

// Posts the RMA operations that move `len` bytes between local memory and a
// chunk's segments, split at each segment boundary and at the provider's
// largest RMA: from operation `first` on (numbered as count_chunk_ops counts
// them), at most `max_ops` of them. `ctx` is used for every operation.
// Returns the number of the operation after the last one posted, short of
// the total when `max_ops` ran out or the send queue was full (FI_EAGAIN):
// the caller posts the rest later. Writes are unsignalled when `signalled` is
// false; Reads are always signalled.
Result<std::size_t> post_chunk_rma(fabric::Endpoint& ep, fabric::OpContext* ctx, bool write, std::uint8_t* local,
                                   std::size_t len, void* desc, std::span<const rpcrdma::Segment> segments,
                                   bool signalled, std::size_t first = 0, std::size_t max_ops = SIZE_MAX);

}  // namespace nfsrdma::rdma
