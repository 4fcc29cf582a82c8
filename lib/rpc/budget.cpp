#include "lib/rpc/budget.hpp"

#include <unistd.h>

#include <algorithm>

#include "lib/base/metrics.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma::rpc {

namespace {
constexpr const char* kKindNames[] = {"tcp_calls", "tcp_records", "rdma_connections", "rdma_payload", "drc", "mount"};
}

std::size_t MemoryBudget::default_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t machine = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                                     : std::size_t{4} << 30;
  return std::max(machine / 4, std::size_t{256} << 20);
}

MemoryBudget::MemoryBudget(std::size_t limit, std::size_t per_address)
    : limit_(limit), per_address_(std::min(per_address, limit)) {
  auto& r = metrics::registry();
  for (int k = 0; k < kKinds; ++k) {
    held_[k] = &r.gauge("nfsrdma_server_memory_bytes", "Memory clients made the server hold, by kind",
                        {{"kind", kKindNames[k]}});
    refused_[k] = &r.counter("nfsrdma_server_memory_refused_total",
                             "Growth refused at the memory budget (back-pressure), by kind", {{"kind", kKindNames[k]}});
  }
  r.gauge("nfsrdma_server_memory_limit_bytes", "The memory budget (--max-memory)").set(static_cast<std::int64_t>(limit));
}

bool MemoryBudget::fits_locked(const Address& addr, std::size_t bytes) const {
  if (used_.load(std::memory_order_relaxed) + bytes > limit_) return false;
  if (addr == Address{}) return true;  // an unknown address has no share, only the limit
  auto it = by_address_.find(addr);
  return (it == by_address_.end() ? 0 : it->second) + bytes <= per_address_;
}

bool MemoryBudget::room(const Address& addr, std::size_t bytes) {
  std::lock_guard lk(mu_);
  return fits_locked(addr, bytes);
}

bool MemoryBudget::wait(Kind kind, const Address& addr, std::size_t bytes) {
  std::lock_guard lk(mu_);
  if (fits_locked(addr, bytes)) return false;
  std::size_t& need = waiting_[addr];
  need = std::max(need, bytes);
  refused_[kind]->inc();
  return true;
}

bool MemoryBudget::try_charge(Kind kind, const Address& addr, std::size_t bytes) {
  {
    std::lock_guard lk(mu_);
    if (!fits_locked(addr, bytes)) {
      refused_[kind]->inc();
      return false;
    }
    by_address_[addr] += bytes;
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }
  held_[kind]->add(static_cast<std::int64_t>(bytes));
  return true;
}

void MemoryBudget::relabel(Kind from, Kind to, std::size_t bytes) {
  held_[from]->add(-static_cast<std::int64_t>(bytes));
  held_[to]->add(static_cast<std::int64_t>(bytes));
}

void MemoryBudget::charge(Kind kind, const Address& addr, std::size_t bytes) {
  {
    std::lock_guard lk(mu_);
    by_address_[addr] += bytes;
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }
  held_[kind]->add(static_cast<std::int64_t>(bytes));
}

void MemoryBudget::release(Kind kind, const Address& addr, std::size_t bytes) {
  if (bytes == 0) return;
  bool room_made = false;
  {
    std::lock_guard lk(mu_);
    auto it = by_address_.find(addr);
    NFSRDMA_CHECK(it != by_address_.end() && it->second >= bytes);
    if ((it->second -= bytes) == 0) by_address_.erase(it);
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    // Only a release that makes room for a waiting address wakes anyone:
    // addresses at their share stay asleep while others' calls come and go.
    for (auto w = waiting_.begin(); w != waiting_.end();) {
      if (fits_locked(w->first, w->second)) {
        room_made = true;
        w = waiting_.erase(w);
      } else {
        ++w;
      }
    }
  }
  held_[kind]->add(-static_cast<std::int64_t>(bytes));
  if (!room_made) return;
  // ORDER: wake_mu_, then mu_ (as forget()): the wakers run with wake_mu_
  // held, so one forgotten is never run after forget() returned (its owner
  // may be gone by then).
  std::lock_guard wl(wake_mu_);
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard lk(mu_);
    for (const auto& [id, w] : wakers_) wake.push_back(w);
  }
  for (auto& w : wake) w();
}

std::size_t MemoryBudget::on_room(std::function<void()> wake) {
  std::lock_guard lk(mu_);
  wakers_[next_waker_] = std::move(wake);
  return next_waker_++;
}

void MemoryBudget::forget(std::size_t waker) {
  std::lock_guard wl(wake_mu_);  // a wake running now ends first
  std::lock_guard lk(mu_);
  wakers_.erase(waker);
}

std::size_t MemoryBudget::used_by(const Address& addr) {
  std::lock_guard lk(mu_);
  auto it = by_address_.find(addr);
  return it == by_address_.end() ? 0 : it->second;
}

}  // namespace nfsrdma::rpc
