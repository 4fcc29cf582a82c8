// The last N events of something that moves requests through states (a
// connection's RPC-RDMA requests): for each, when, which call (its xid),
// which request slot and which state. Cheap enough to keep on: a record is
// a clock read and four relaxed stores into a fixed array, never a lock or
// an allocation. Read from any thread while it is written (a debug page):
// each entry carries the sequence number it was written under, so a reader
// keeps only entries that were whole, and no older than the ring's size,
// when it read them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "lib/base/clock.hpp"

namespace nfsrdma {

template <std::size_t N>
class TraceRing {
  static_assert(N > 0 && (N & (N - 1)) == 0, "a power of two");

 public:
  struct Event {
    std::int64_t ns;  // steady_ns() when recorded
    std::uint32_t id;
    std::uint16_t slot;
    std::uint8_t state;
  };
  static constexpr std::size_t capacity = N;

  // Any thread; writers do not wait for each other.
  void record(std::uint32_t id, std::uint16_t slot, std::uint8_t state) {
    const std::uint64_t seq = next_.fetch_add(1, std::memory_order_relaxed);
    Entry& e = ring_[seq & (N - 1)];
    e.seq.store(kWriting, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // ORDER: marked, then filled
    e.ns.store(steady_ns(), std::memory_order_relaxed);
    e.word.store(std::uint64_t{id} << 32 | std::uint64_t{slot} << 8 | state, std::memory_order_relaxed);
    e.seq.store(seq, std::memory_order_release);
  }

  // Up to `n` of the latest events, oldest first.
  std::vector<Event> last(std::size_t n) const {
    const std::uint64_t end = next_.load(std::memory_order_acquire);
    n = std::min<std::uint64_t>({n, N, end});
    std::vector<Event> out;
    out.reserve(n);
    for (std::uint64_t seq = end - n; seq < end; ++seq) {
      const Entry& e = ring_[seq & (N - 1)];
      if (e.seq.load(std::memory_order_acquire) != seq) continue;  // being written, or written over
      const std::int64_t ns = e.ns.load(std::memory_order_relaxed);
      const std::uint64_t w = e.word.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);  // ORDER: read, then checked again
      if (e.seq.load(std::memory_order_relaxed) != seq) continue;
      out.push_back({ns, static_cast<std::uint32_t>(w >> 32), static_cast<std::uint16_t>(w >> 8),
                     static_cast<std::uint8_t>(w)});
    }
    return out;
  }

  std::uint64_t recorded() const { return next_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t kWriting = ~std::uint64_t{0};
  struct Entry {
    std::atomic<std::uint64_t> seq{kWriting};
    std::atomic<std::int64_t> ns{0};
    std::atomic<std::uint64_t> word{0};
  };
  std::atomic<std::uint64_t> next_{0};
  std::array<Entry, N> ring_{};
};

}  // namespace nfsrdma
