#include "lib/nfs3/lock_ranges.hpp"

namespace nfsrdma::nlm4 {

void RangeSet::apply(std::uint64_t start, std::uint64_t end, Type type) {
  // Cut [start, end] out of every range it touches, keeping the parts outside.
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin()) --it;
  while (it != ranges_.end() && it->second.start <= end) {
    LockRange r = it->second;
    if (r.end < start) {
      ++it;
      continue;
    }
    it = ranges_.erase(it);
    if (r.start < start) ranges_[r.start] = {r.start, start - 1, r.exclusive};
    if (r.end > end) ranges_[end + 1] = {end + 1, r.end, r.exclusive};
  }
  if (type == Type::unlock) return;
  LockRange n{start, end, type == Type::exclusive};
  // Merge with neighbours of the same type that now touch it.
  auto next = ranges_.upper_bound(start);
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.exclusive == n.exclusive && prev->second.end + 1 == n.start) {
      n.start = prev->second.start;
      ranges_.erase(prev);
    }
  }
  if (next != ranges_.end() && n.end != kEof && next->second.exclusive == n.exclusive &&
      next->second.start == n.end + 1) {
    n.end = next->second.end;
    ranges_.erase(next);
  }
  ranges_[n.start] = n;
}

std::optional<LockRange> RangeSet::conflict(std::uint64_t start, std::uint64_t end, bool exclusive) const {
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->second.start <= end; ++it) {
    if (it->second.end < start) continue;
    if (exclusive || it->second.exclusive) return it->second;
  }
  return std::nullopt;
}

}  // namespace nfsrdma::nlm4
