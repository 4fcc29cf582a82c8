// One lock owner's byte-range locks on one file, with the POSIX rules the
// kernel applies to the real lock (fcntl(2)): a new lock replaces whatever the
// owner held where it overlaps (an upgrade, a downgrade, or a split of what it
// cuts through), and ranges of one type that touch or overlap become one.
// The server's lock manager keeps this beside the kernel's own lock, to count
// what a client holds and to name holders (the kernel decides conflicts); the
// client keeps it to know what to reclaim after a server restart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace nfsrdma::nlm4 {

// Offsets as the kernel's off_t allows; kEof as an end means "and beyond".
constexpr std::uint64_t kEof = INT64_MAX;

struct LockRange {
  std::uint64_t start = 0;
  std::uint64_t end = 0;  // inclusive
  bool exclusive = false;
  bool operator==(const LockRange&) const = default;
};

class RangeSet {
 public:
  enum class Type { shared, exclusive, unlock };
  // Applies a lock or unlock of [start, end].
  void apply(std::uint64_t start, std::uint64_t end, Type type);
  // A held range overlapping [start, end] that a request of that kind
  // conflicts with (an exclusive request conflicts with any; a shared one
  // with exclusive ones).
  std::optional<LockRange> conflict(std::uint64_t start, std::uint64_t end, bool exclusive) const;
  std::size_t size() const { return ranges_.size(); }
  bool empty() const { return ranges_.empty(); }
  auto begin() const { return ranges_.begin(); }
  auto end() const { return ranges_.end(); }

 private:
  std::map<std::uint64_t, LockRange> ranges_;  // by start; disjoint
};

}  // namespace nfsrdma::nlm4
