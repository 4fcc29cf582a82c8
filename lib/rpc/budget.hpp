// One memory budget over everything clients can make a server hold: TCP
// calls, replies and partial records, RDMA connections' buffers, the shared
// payload pools, the duplicate request cache, the MOUNT list. Per-connection
// and per-table bounds cap each kind; this caps their sum, whatever the
// number of connections, and gives each client address a share of it, so
// that one address cannot take it all.
//
// Two ways to charge. try_charge: refusable growth, refused past the limit or
// the address's share (a TCP connection stops reading, an RDMA connection is
// refused or its credits stop growing: back-pressure, nothing lost). charge:
// memory already held or bounded by its own table (DRC, MOUNT list), counted
// so the metric and the others' room are true. Releases wake whoever waits
// for room (on_room).
//
// Thread-safe. Transports hold a reference; the server owns it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory_resource>
#include <mutex>
#include <vector>

namespace nfsrdma::metrics {
class Gauge;
class Counter;
}

namespace nfsrdma::rpc {

using Address = std::array<std::uint8_t, 16>;  // to_v6(); all zeros: unknown
// What every client shares (payload pools, the DRC): counted in the total, in
// no client's share.
constexpr Address kShared = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

class MemoryBudget {
 public:
  enum Kind : std::uint8_t { tcp_calls, tcp_records, rdma_connections, rdma_payload, drc, mount, kKinds };

  // `limit` bytes in all, `per_address` of them for one client address.
  MemoryBudget(std::size_t limit, std::size_t per_address);
  // A quarter of the machine's memory, at least 256 MiB.
  static std::size_t default_limit();

  // Charges `bytes` if they fit the limit and `addr`'s share (an unknown
  // address, all zeros, has no share: only the limit); else nothing, and
  // false (counted as back-pressure of `kind`).
  bool try_charge(Kind kind, const Address& addr, std::size_t bytes);
  // Whether `bytes` more would fit now, charging nothing.
  bool room(const Address& addr, std::size_t bytes);
  void charge(Kind kind, const Address& addr, std::size_t bytes);
  void release(Kind kind, const Address& addr, std::size_t bytes);
  // `bytes` charged as `from` now count as `to` (the totals do not move).
  void relabel(Kind from, Kind to, std::size_t bytes);

  // `wake` runs (on the releasing thread, holding only the wakers' own lock)
  // after a release that makes room for someone who wait()ed; a transport
  // registers one at start and forgets it (by the number returned) before it
  // goes: once forget() returns, it never runs again. A waker must not call
  // into the budget.
  std::size_t on_room(std::function<void()> wake);
  void forget(std::size_t waker);
  // Someone from `addr` needs `bytes` more (counted as back-pressure of
  // `kind`); false if they fit after all (a release came first): no wait.
  bool wait(Kind kind, const Address& addr, std::size_t bytes);

  std::size_t limit() const { return limit_; }
  std::size_t per_address() const { return per_address_; }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  std::size_t used_by(const Address& addr);

 private:
  const std::size_t limit_, per_address_;
  std::atomic<std::size_t> used_{0};
  std::array<metrics::Gauge*, kKinds> held_{};
  std::array<metrics::Counter*, kKinds> refused_{};
  bool fits_locked(const Address& addr, std::size_t bytes) const;

  std::mutex wake_mu_;  // held while wakers run, and by forget(); taken before mu_
  std::mutex mu_;       // guards by_address_, waiting_ and wakers_
  // An address leaves by_address_ when it holds nothing: its node is kept for the next.
  std::pmr::unsynchronized_pool_resource nodes_;
  std::pmr::map<Address, std::size_t> by_address_{&nodes_};
  std::map<Address, std::size_t> waiting_;  // address -> the most one of its waiters needs
  std::map<std::size_t, std::function<void()>> wakers_;
  std::size_t next_waker_ = 0;
};

}  // namespace nfsrdma::rpc
