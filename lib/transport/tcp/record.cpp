#include "lib/transport/tcp/record.hpp"

#include <algorithm>
#include <string>

namespace nfsrdma::tcp {

std::span<std::uint8_t> RecordReader::buffer() {
  NFSRDMA_CHECK(!complete_);
  if (!in_body_) return {header_.data() + header_have_, header_.size() - header_have_};
  std::size_t want = std::min(fragment_left_, kGrowStep);
  if (record_.size() < record_have_ + want) record_.resize(record_have_ + want);
  return {record_.data() + record_have_, want};
}

Result<bool> RecordReader::commit(std::size_t n) {
  if (!in_body_) {
    header_have_ += n;
    if (header_have_ < header_.size()) return false;
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
    // Room for the whole fragment at once, so the record is never moved as it
    // grows; buffer() still fills (touches) it only as the bytes arrive.
    record_.reserve(record_have_ + fragment_left_);
  } else {
    record_have_ += n;
    fragment_left_ -= n;
    if (fragment_left_ > 0) return false;
    in_body_ = false;
  }
  if (!in_body_ && last_) {
    if (record_have_ == 0) {
      // An empty record carries no RPC message; ignore it.
      last_ = false;
      return false;
    }
    complete_ = true;
    return true;
  }
  return false;
}

std::vector<std::uint8_t> RecordReader::take() {
  NFSRDMA_CHECK(complete_);
  record_.resize(record_have_);
  std::vector<std::uint8_t> out = std::move(record_);
  record_ = {};
  record_have_ = 0;
  complete_ = false;
  last_ = false;
  return out;
}

std::array<std::uint8_t, 4> record_mark(std::uint32_t length) {
  std::uint32_t w = kLastFragment | length;
  return {static_cast<std::uint8_t>(w >> 24), static_cast<std::uint8_t>(w >> 16),
          static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w)};
}

}  // namespace nfsrdma::tcp
