#include "lib/transport/tcp/record.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace nfsrdma::tcp {

std::vector<std::uint8_t> BufferShelf::take(std::size_t bytes) {
  std::unique_lock lk(mu_);
  if (bytes < kMinBytes) {
    // Between the sizes: a small one would be grown out of the shelf's sizes, and lost.
    if (bytes > kSmallMaxBytes || small_.empty()) return {};
    std::vector<std::uint8_t> out = std::move(small_.back());
    small_.pop_back();
    lk.unlock();
    out.reserve(bytes);  // the steady state's sizes repeat: it has room already
    return out;
  }
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->capacity() >= bytes && (best == kept_.end() || it->capacity() < best->capacity())) best = it;
  }
  if (best == kept_.end()) return {};
  std::vector<std::uint8_t> out = std::move(*best);
  *best = std::move(kept_.back());
  kept_.pop_back();
  return out;
}

void BufferShelf::give(std::vector<std::uint8_t>&& b) {
  const std::size_t room = b.capacity();
  if (room == 0 || (room > kSmallMaxBytes && room < kMinBytes)) return;
  b.clear();
  std::lock_guard lk(mu_);
  if (room < kMinBytes) {
    if (small_.size() < max_small_) small_.push_back(std::move(b));
    return;
  }
  if (kept_.size() < max_) {
    kept_.push_back(std::move(b));
    return;
  }
  // Full: a larger one takes the smallest one's place, so what is kept
  // follows the largest calls (1 MiB WRITEs first, then 4 MiB READs).
  auto smallest = std::min_element(kept_.begin(), kept_.end(),
                                   [](const auto& x, const auto& y) { return x.capacity() < y.capacity(); });
  if (smallest->capacity() < b.capacity()) *smallest = std::move(b);
}

std::size_t BufferShelf::kept() const {
  std::lock_guard lk(mu_);
  return kept_.size() + small_.size();
}

RecordReader::RecordReader(std::size_t max_record_bytes, BufferShelf* shelf, std::size_t stage_bytes)
    : max_record_bytes_(max_record_bytes), shelf_(shelf), stage_bytes_(std::max(stage_bytes, kDirectBytes)),
      staged_(new std::uint8_t[stage_bytes_]) {}

void RecordReader::grow_record(std::size_t need) {
  if (need <= record_.capacity()) return;
  // A new record takes kept room: a large one's pages are not faulted
  // afresh, and a small one is not allocated.
  if (shelf_ && record_have_ == 0) {
    if (auto kept = shelf_->take(need); kept.capacity() >= need) {
      record_ = std::move(kept);
      return;
    }
  }
  // Geometric: at least double, so a record built from many fragments is
  // moved O(log n) times, never once per fragment.
  record_.reserve(std::max(need, std::min(2 * record_.capacity(), max_record_bytes_)));
}

std::span<std::uint8_t> RecordReader::buffer() {
  NFSRDMA_CHECK(!complete_);
  // A large fragment with nothing staged: straight into the record.
  direct_ = in_body_ && !has_unparsed() && fragment_left_ >= kDirectBytes;
  if (direct_) {
    std::size_t want = std::min(fragment_left_, kGrowStep);
    grow_record(record_have_ + want);
    if (record_.size() < record_have_ + want) record_.resize(record_have_ + want);
    return {record_.data() + record_have_, want};
  }
  if (!has_unparsed()) staged_at_ = staged_end_ = 0;
  if (staged_end_ == stage_bytes_) {
    // Only parse() leaves bytes behind, after a finished record: move them down.
    std::memmove(staged_.get(), staged_.get() + staged_at_, staged_end_ - staged_at_);
    staged_end_ -= staged_at_;
    staged_at_ = 0;
  }
  return {staged_.get() + staged_end_, stage_bytes_ - staged_end_};
}

void RecordReader::commit(std::size_t n) {
  if (!direct_) {
    staged_end_ += n;
    return;
  }
  record_have_ += n;
  fragment_left_ -= n;
  if (fragment_left_ == 0) in_body_ = false;
}

Result<void> RecordReader::on_header() {
  std::uint32_t word = (std::uint32_t{header_[0]} << 24) | (std::uint32_t{header_[1]} << 16) |
                       (std::uint32_t{header_[2]} << 8) | header_[3];
  header_have_ = 0;
  last_ = (word & kLastFragment) != 0;
  fragment_left_ = word & ~kLastFragment;
  if (fragment_left_ > max_record_bytes_ || record_have_ + fragment_left_ > max_record_bytes_) {
    return Error{ErrorDomain::rpc, 0, Action::reconnect,
                 "record of at least " + std::to_string(record_have_ + fragment_left_) +
                     " bytes exceeds the limit of " + std::to_string(max_record_bytes_)};
  }
  in_body_ = fragment_left_ > 0;
  // Room for the whole fragment (untouched until its bytes arrive), so a
  // record sent as one fragment is never moved.
  grow_record(record_have_ + fragment_left_);
  return {};
}

Result<bool> RecordReader::parse() {
  NFSRDMA_CHECK(!complete_);
  for (;;) {
    if (!in_body_ && last_) {
      last_ = false;
      // An empty record carries no RPC message; ignore it.
      if (record_have_ > 0) {
        complete_ = true;
        return true;
      }
    }
    const std::size_t avail = staged_end_ - staged_at_;
    if (avail == 0) return false;
    const std::uint8_t* from = staged_.get() + staged_at_;
    if (!in_body_) {
      std::size_t n = std::min(avail, header_.size() - header_have_);
      std::memcpy(header_.data() + header_have_, from, n);
      header_have_ += n;
      staged_at_ += n;
      if (header_have_ == header_.size()) {
        if (auto r = on_header(); !r) return r.error();
      }
      continue;
    }
    std::size_t n = std::min(avail, fragment_left_);
    grow_record(record_have_ + n);
    if (record_.size() < record_have_ + n) record_.resize(record_have_ + n);
    std::memcpy(record_.data() + record_have_, from, n);
    record_have_ += n;
    fragment_left_ -= n;
    staged_at_ += n;
    if (fragment_left_ == 0) in_body_ = false;
  }
}

std::vector<std::uint8_t> RecordReader::take() {
  NFSRDMA_CHECK(complete_);
  record_.resize(record_have_);
  std::vector<std::uint8_t> out = std::move(record_);
  record_ = {};
  record_have_ = 0;
  complete_ = false;
  return out;
}

std::array<std::uint8_t, 4> record_mark(std::uint32_t length) {
  std::uint32_t w = kLastFragment | length;
  return {static_cast<std::uint8_t>(w >> 24), static_cast<std::uint8_t>(w >> 16),
          static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w)};
}

}  // namespace nfsrdma::tcp
