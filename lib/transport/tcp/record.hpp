// ONC RPC record marking over a byte stream (RFC 5531 §11): each fragment has a
// 4-byte header, top bit "last fragment", low 31 bits its length; fragments
// concatenate into one record. Pure: the caller moves the bytes.
//
// Theory of operation: the reader is either in `header` (collecting 4 bytes) or
// in `body` (collecting `fragment_left_` bytes straight into the record). The
// caller asks buffer() where the next bytes go, reads into it, and calls
// commit(n). The record grows by at most kGrowStep past what has arrived, so a
// peer that announces a large fragment and sends nothing does not make us
// allocate it. A record over max_record_bytes is an error: close the connection.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "lib/base/result.hpp"

namespace nfsrdma::tcp {

constexpr std::uint32_t kLastFragment = 0x80000000u;

class RecordReader {
 public:
  explicit RecordReader(std::size_t max_record_bytes) : max_record_bytes_(max_record_bytes) {}

  // Where to put the next bytes read from the stream (never empty).
  std::span<std::uint8_t> buffer();
  // `n` bytes were written into buffer(). Returns true when a whole record is
  // ready for take(); an error when the stream broke the limits.
  Result<bool> commit(std::size_t n);
  // The finished record; the reader starts on the next one.
  std::vector<std::uint8_t> take();

 private:
  static constexpr std::size_t kGrowStep = 256 * 1024;

  std::size_t max_record_bytes_;
  std::array<std::uint8_t, 4> header_{};
  std::size_t header_have_ = 0;
  bool in_body_ = false;
  bool last_ = false;
  bool complete_ = false;
  std::size_t fragment_left_ = 0;
  std::size_t record_have_ = 0;  // bytes of `record_` that hold data
  std::vector<std::uint8_t> record_;
};

// Writes the 4-byte record mark for a single-fragment record of `length` bytes.
std::array<std::uint8_t, 4> record_mark(std::uint32_t length);

}  // namespace nfsrdma::tcp
