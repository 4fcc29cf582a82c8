// What moves requests through states (a connection's RPC-RDMA requests) keeps
// here its last N changes and each request slot's latest: when, which call
// (its xid), which slot, which state. Cheap enough to keep on: a change is a
// clock read and relaxed stores into fixed arrays, no lock, no read-modify-
// write, no allocation. One thread writes at a time (the owner's); any thread
// may read meanwhile (a debug page): each entry is a small seqlock, so a
// reader keeps only what was whole when it read it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
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

  // `slots`: how many slots there are (record's `slot` is below it).
  explicit TraceRing(std::size_t slots) : slots_(slots), latest_(std::make_unique<Entry[]>(slots)) {}

  // The one writer's.
  void record(std::uint32_t id, std::uint16_t slot, std::uint8_t state) {
    const std::int64_t ns = steady_ns();
    const std::uint64_t word = std::uint64_t{id} << 32 | std::uint64_t{slot} << 8 | state;
    const std::uint64_t seq = next_.load(std::memory_order_relaxed);
    ring_[seq & (N - 1)].write(2 * seq + 2, ns, word);
    if (slot < slots_) {
      Entry& e = latest_[slot];
      e.write(e.seq.load(std::memory_order_relaxed) + 2, ns, word);
    }
    next_.store(seq + 1, std::memory_order_release);
  }

  // Any thread: up to `n` of the latest changes, oldest first.
  std::vector<Event> last(std::size_t n) const {
    const std::uint64_t end = next_.load(std::memory_order_acquire);
    n = std::min<std::uint64_t>({n, N, end});
    std::vector<Event> out;
    out.reserve(n);
    for (std::uint64_t seq = end - n; seq < end; ++seq) {
      // Written over since `end` was read: it is not the change of `seq`.
      if (auto e = ring_[seq & (N - 1)].read(); e && e->first == 2 * seq + 2) out.push_back(e->second);
    }
    return out;
  }

  // Any thread: each slot's latest change, for the slots that have one.
  std::vector<Event> latest() const {
    std::vector<Event> out;
    for (std::size_t i = 0; i < slots_; ++i) {
      if (auto e = latest_[i].read(); e && e->first) out.push_back(e->second);
    }
    return out;
  }

 private:
  // A seqlock: seq odd while written, even (and moved on) once whole.
  struct Entry {
    std::atomic<std::uint64_t> seq{0};
    std::atomic<std::int64_t> ns{0};
    std::atomic<std::uint64_t> word{0};

    void write(std::uint64_t even, std::int64_t when, std::uint64_t w) {
      seq.store(even - 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);  // ORDER: marked, then filled
      ns.store(when, std::memory_order_relaxed);
      word.store(w, std::memory_order_relaxed);
      seq.store(even, std::memory_order_release);
    }
    // (seq, event), or nothing if it was being written.
    std::optional<std::pair<std::uint64_t, Event>> read() const {
      const std::uint64_t s = seq.load(std::memory_order_acquire);
      if (s & 1) return std::nullopt;
      const std::int64_t when = ns.load(std::memory_order_relaxed);
      const std::uint64_t w = word.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);  // ORDER: read, then checked again
      if (seq.load(std::memory_order_relaxed) != s) return std::nullopt;
      return std::pair{s, Event{when, static_cast<std::uint32_t>(w >> 32), static_cast<std::uint16_t>(w >> 8),
                                static_cast<std::uint8_t>(w)}};
    }
  };
  std::atomic<std::uint64_t> next_{0};
  std::array<Entry, N> ring_{};
  const std::size_t slots_;
  std::unique_ptr<Entry[]> latest_;
};

}  // namespace nfsrdma
