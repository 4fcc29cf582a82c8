// ONC RPC record marking over a byte stream (RFC 5531 §11): each fragment has a
// 4-byte header, top bit "last fragment", low 31 bits its length; fragments
// concatenate into one record. Pure: the caller moves the bytes.
//
// Theory of operation: the caller asks buffer() where the next bytes go, reads
// into it, calls commit(n), then parse() until it answers false, take()-ing
// each record it reports. Bytes land in one of two places:
//   - inside a large fragment, straight into the record (no copy);
//   - otherwise in a small staging buffer, so fragment headers arrive with
//     the data around them: one read can carry thousands of small fragments,
//     and parse() moves them into the record in one pass.
// Cost is linear in the bytes received: the record grows geometrically (never
// past the limit, never re-reserved per fragment), and staged bytes are
// copied once. The record grows by at most kGrowStep past what has arrived,
// so a peer that announces a large fragment and sends nothing does not make
// us fill it. A record over max_record_bytes is an error: close the connection.
// Bytes after a finished record stay staged for the next parse(); see
// has_unparsed().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "lib/base/result.hpp"

namespace nfsrdma::tcp {

constexpr std::uint32_t kLastFragment = 0x80000000u;

// Record and reply buffers kept from call to call (thread-safe). glibc
// hands a freed block of megabytes back to the kernel (a thread's heap that
// empties is unmapped), so without it every 4 MiB call zero-filled 1,024
// freshly faulted pages: half the throughput of 1 MiB calls, three times the
// CPU. Holds at most `max_large` buffers of at least kMinBytes, lending the
// smallest that fits, and at most `max_small` of at most kSmallMaxBytes (a
// call or reply of a few KiB: kept, a call in the steady state allocates
// none), lending the last given. Between the two sizes nothing is kept.
class BufferShelf {
 public:
  static constexpr std::size_t kMinBytes = 256 * 1024;
  static constexpr std::size_t kSmallMaxBytes = 16 * 1024;
  explicit BufferShelf(std::size_t max_large, std::size_t max_small = 0) : max_(max_large), max_small_(max_small) {}
  // Up to kSmallMaxBytes: a kept small buffer, emptied, with room for `bytes`.
  // Else the smallest kept large buffer with room for `bytes`, emptied. Or
  // an empty vector with no room when none is kept.
  std::vector<std::uint8_t> take(std::size_t bytes);
  // Keeps `b` when its room is one of the two sizes and there is a place for
  // it, or, full of large ones, in place of a smaller one; else frees it.
  void give(std::vector<std::uint8_t>&& b);
  std::size_t kept() const;  // large and small

 private:
  const std::size_t max_, max_small_;
  mutable std::mutex mu_;
  std::vector<std::vector<std::uint8_t>> kept_;
  std::vector<std::vector<std::uint8_t>> small_;
};

class RecordReader {
 public:
  // A fragment with at least this much left is read straight into its record.
  static constexpr std::size_t kDirectBytes = 16 * 1024;

  // `shelf` (optional) lends the room of records and takes it back.
  // `stage_bytes`: the most one read brings of records smaller than
  // kDirectBytes (a client reading a batch of 4 KiB replies wants more than
  // a server reading small calls).
  explicit RecordReader(std::size_t max_record_bytes, BufferShelf* shelf = nullptr,
                        std::size_t stage_bytes = kDirectBytes);

  // Where to put the next bytes read from the stream (never empty). Not while
  // a record waits for take().
  std::span<std::uint8_t> buffer();
  // `n` bytes were written into buffer().
  void commit(std::size_t n);
  // Consumes what has arrived. true: a whole record is ready for take(); false:
  // more bytes are needed. An error when the stream broke the limits.
  Result<bool> parse();
  // The finished record; call parse() again before reading more.
  std::vector<std::uint8_t> take();
  // Part of a record has arrived (a header, or a fragment's first bytes).
  bool in_record() const { return in_body_ || header_have_ > 0 || record_have_ > 0; }
  // Staged bytes not yet parsed (the beginning of the next record).
  bool has_unparsed() const { return staged_end_ > staged_at_; }
  // Memory the record being assembled holds (its room, not just its bytes).
  std::size_t held_bytes() const { return record_.capacity(); }

 private:
  static constexpr std::size_t kGrowStep = 256 * 1024;

  Result<void> on_header();
  void grow_record(std::size_t need);

  std::size_t max_record_bytes_;
  BufferShelf* shelf_;
  std::array<std::uint8_t, 4> header_{};
  std::size_t header_have_ = 0;
  bool in_body_ = false;
  bool last_ = false;
  bool complete_ = false;
  bool direct_ = false;  // buffer() handed out record space
  std::size_t fragment_left_ = 0;
  std::size_t record_have_ = 0;  // bytes of `record_` that hold data
  std::vector<std::uint8_t> record_;
  std::size_t stage_bytes_;
  std::unique_ptr<std::uint8_t[]> staged_;
  std::size_t staged_at_ = 0, staged_end_ = 0;
};

// Writes the 4-byte record mark for a single-fragment record of `length` bytes.
std::array<std::uint8_t, 4> record_mark(std::uint32_t length);

}  // namespace nfsrdma::tcp
