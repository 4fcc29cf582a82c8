// Duplicate request cache (DRC) for non-idempotent NFS procedures.
//
// A retransmitted CREATE, REMOVE, RENAME... must get the reply of the first
// execution, not run twice (a REMOVE run twice answers NOENT). Entries are keyed
// on xid, client address (not port: a client reconnecting from a new port
// retransmits), program, version, procedure and a checksum of the call's
// length and first 256 bytes after the xid (as nfsd's RC_CSUMLEN), so an xid
// reused for a different call is not mistaken for a retransmission.
// A retransmission of a call still executing is dropped. Bounded in entries and
// in age; the oldest go first. Entries and index nodes are kept for reuse, so
// once the cache has filled, a call allocates nothing here.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <memory_resource>
#include <optional>
#include <unordered_map>
#include <vector>

#include "lib/rpc/budget.hpp"

namespace nfsrdma::server {

class DuplicateRequestCache {
 public:
  struct Key {
    std::uint32_t xid = 0;
    std::array<std::uint8_t, 16> addr{};
    std::uint32_t prog = 0, vers = 0, proc = 0;
    std::uint64_t checksum = 0;
    bool operator==(const Key&) const = default;
  };

  enum class Verdict { execute, in_progress, replay };

  explicit DuplicateRequestCache(std::size_t capacity = 8192,
                                 std::chrono::seconds max_age = std::chrono::seconds(120))
      : capacity_(capacity), max_age_(max_age) {}

  // execute: the caller runs the call and then calls finish() or abandon().
  // replay: `reply` holds the cached reply to send again.
  Verdict begin(const Key& key, std::vector<std::uint8_t>& reply);
  void finish(const Key& key, const std::vector<std::uint8_t>& reply);
  void abandon(const Key& key);

  std::uint64_t hits() const { return hits_; }
  // What the cache holds is charged to `budget` (what every client shares):
  // bounded by the capacity, so counted, never refused. Before the first call.
  void charge_to(rpc::MemoryBudget* budget) { budget_ = budget; }
  ~DuplicateRequestCache();

 private:
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Entry {
    Key key;
    bool done = false;
    std::vector<std::uint8_t> reply;
    std::chrono::steady_clock::time_point at;
  };
  void evict_locked(std::chrono::steady_clock::time_point now);

  std::size_t capacity_;
  std::chrono::seconds max_age_;
  std::mutex mu_;  // guards everything below
  std::list<Entry> lru_;    // oldest first
  std::list<Entry> spare_;  // evicted, for reuse: with lru_, never more than capacity_ + 1
  std::pmr::unsynchronized_pool_resource nodes_;  // index_'s, reused (guarded by mu_)
  std::pmr::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_{&nodes_};
  std::uint64_t hits_ = 0;
  rpc::MemoryBudget* budget_ = nullptr;
  std::size_t held_bytes_ = 0;  // charged to budget_
  void held_grew_locked(std::size_t bytes);
};

}  // namespace nfsrdma::server
