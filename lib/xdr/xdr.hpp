// RFC 4506 XDR over byte spans. Every type is described once, by a function
//   template <class X> void codec(X& x, T& v)
// that lists its fields; Decoder and Encoder walk the same description, so the two
// directions cannot drift apart (as rpcgen's bidirectional xdr_* routines).
//
// Decoder is bounded: each length read from the input is checked against what is
// left and against the caller's cap before anything is sized from it. The first
// failure sticks; later reads return zeros; the caller checks ok() once at the end.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lib/base/result.hpp"

namespace nfsrdma::xdr {

// A big-endian 4-byte unit at p (for peeking at a status word without a Decoder).
inline std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
// And one written there (patching a word already encoded, such as an xid).
inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

enum class Fault : std::uint8_t {
  none,
  truncated,     // input ended inside an item
  too_long,      // a length or count above its cap
  bad_value,     // an enum or bool outside its range
};

const char* fault_name(Fault f);

constexpr std::size_t pad4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// One RPC message as RPC-over-RDMA splits it (RFC 8166 §3.4, RFC 8267 §2),
// whichever transport carries it: the XDR stream is `head`, then `payload`,
// the body of the message's one DDP-eligible opaque (WRITE data in a call,
// READ data in a reply), then its round-up, then `tail`. `head` ends with the
// opaque's length word. A message sent or received whole is all `head`.
// The three views borrow memory someone else keeps: registered memory, a
// receive buffer, the caller's.
struct Parts {
  std::span<const std::uint8_t> head, payload, tail;

  bool split() const { return !payload.empty() || !tail.empty(); }
  // The bytes of the XDR stream, the round-up included.
  std::size_t stream_bytes() const { return head.size() + pad4(payload.size()) + tail.size(); }
  // Copies the stream's bytes [from, from + n), at most to its end, to `out`.
  void copy(std::size_t from, std::size_t n, std::uint8_t* out) const;
  // The whole stream, copied into one buffer (control-plane calls, tests).
  std::vector<std::uint8_t> joined() const {
    std::vector<std::uint8_t> out(stream_bytes());
    copy(0, out.size(), out.data());
    return out;
  }
};

class Decoder {
 public:
  explicit Decoder(std::span<const std::uint8_t> in) : in_(in) {}
  // Decodes a split message as one stream: the opaque whose length word ends
  // `head` borrows `payload`, whose size must equal that word; any other item
  // reaching across that position is bad_value. `head` and `tail` must be
  // adjacent in memory (an inline part with the payload cut out of it).
  explicit Decoder(const Parts& m);

  bool ok() const { return fault_ == Fault::none; }
  Fault fault() const { return fault_; }
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return in_.size() - pos_; }
  // The bytes not yet decoded (valid while the input is).
  std::span<const std::uint8_t> rest() const { return in_.subspan(pos_); }
  // The same, still split while the placed payload is not yet decoded.
  Parts unread() const;
  Result<void> result() const;

  void fail(Fault f) {
    if (fault_ == Fault::none) fault_ = f;
    pos_ = in_.size();
  }

  void u32(std::uint32_t& v);
  void i32(std::int32_t& v);
  void u64(std::uint64_t& v);
  void i64(std::int64_t& v);
  void boolean(bool& v);
  template <class E>
  void enumeration(E& v) {
    std::uint32_t raw = 0;
    u32(raw);
    v = static_cast<E>(raw);
  }
  // Fixed-length opaque: exactly out.size() bytes plus padding.
  void fixed(std::span<std::uint8_t> out);
  // Variable-length opaque, zero-copy: `view` borrows the input buffer.
  void opaque_view(std::span<const std::uint8_t>& view, std::uint32_t max);
  void opaque(std::vector<std::uint8_t>& out, std::uint32_t max);
  void string(std::string& out, std::uint32_t max);
  // Element count of a counted array: capped, and no larger than the bytes left
  // could hold at `min_element_bytes` each, so a vector sized from it is bounded.
  // `current` is ignored here; it is what the Encoder writes.
  std::uint32_t count(std::size_t current, std::uint32_t max, std::size_t min_element_bytes);
  // Skips `n` bytes (padded), e.g. a payload decoded elsewhere.
  void skip(std::size_t n);

 private:
  const std::uint8_t* take(std::size_t n);

  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  Fault fault_ = Fault::none;
  std::span<const std::uint8_t> placed_;
  std::size_t placed_at_ = 0;
  bool placed_pending_ = false;
};

// Appends to a caller-owned vector, so a connection can reuse one buffer for
// every reply it sends.
class Encoder {
 public:
  explicit Encoder(std::vector<std::uint8_t>& out) : out_(out) {}

  bool ok() const { return true; }
  std::size_t size() const { return out_.size(); }
  // Encoding a value the description rejects is a bug in the caller.
  [[noreturn]] void fail(Fault) { panic("xdr: encoding an out-of-range value", __FILE__, __LINE__); }
  // Drops what was written after byte `at` (to replace a half-built reply).
  void truncate(std::size_t at) { out_.resize(at); }

  // Appended, not resized into: growing a vector by resize() zero-fills
  // through an out-of-line call per field.
  void u32(std::uint32_t v) {
    std::uint8_t b[4];
    store_be32(b, v);
    out_.insert(out_.end(), b, b + 4);
  }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void boolean(bool v) { u32(v ? 1 : 0); }
  template <class E>
  void enumeration(E v) {
    u32(static_cast<std::uint32_t>(v));
  }
  void fixed(std::span<const std::uint8_t> in);
  void opaque_view(std::span<const std::uint8_t> in, std::uint32_t max);
  void opaque(const std::vector<std::uint8_t>& in, std::uint32_t max) { opaque_view(in, max); }
  void string(const std::string& in, std::uint32_t max);
  std::uint32_t count(std::size_t current, std::uint32_t max, std::size_t) {
    NFSRDMA_CHECK(current <= max);
    u32(static_cast<std::uint32_t>(current));
    return static_cast<std::uint32_t>(current);
  }
  // Reserves room for an opaque of up to `max` bytes and returns it for the caller
  // to fill in place (e.g. pread straight into a reply); finish with
  // commit_opaque(at, n) to write the length and trim to the padded size.
  std::size_t reserve_opaque(std::uint32_t max);
  std::span<std::uint8_t> reserved(std::size_t at, std::uint32_t max);
  void commit_opaque(std::size_t at, std::uint32_t n);
  // Overwrites a u32 already written at byte offset `at`.
  void patch_u32(std::size_t at, std::uint32_t v);

 private:
  std::vector<std::uint8_t>& out_;
};

// Primitive members of arrays and optionals.
inline void codec(Decoder& x, std::uint32_t& v) { x.u32(v); }
inline void codec(Encoder& x, std::uint32_t& v) { x.u32(v); }
inline void codec(Decoder& x, std::uint64_t& v) { x.u64(v); }
inline void codec(Encoder& x, std::uint64_t& v) { x.u64(v); }

// Generic helpers so descriptions read as field lists. For the Encoder the
// description runs on a const object through a const_cast: Encoder never writes.
template <class X, class T>
void xdr_optional(X& x, std::optional<T>& v) {
  bool present = v.has_value();
  x.boolean(present);
  if (!x.ok()) return;
  if (present) {
    if (!v) v.emplace();
    codec(x, *v);
  } else {
    v.reset();
  }
}

template <class X, class T>
void xdr_array(X& x, std::vector<T>& v, std::uint32_t max, std::size_t min_element_bytes) {
  std::uint32_t n = x.count(v.size(), max, min_element_bytes);
  if (!x.ok()) return;
  v.resize(n);
  for (auto& e : v) {
    codec(x, e);
    if (!x.ok()) return;
  }
}

// An XDR linked list (`T *next`), as NFS and MOUNT use for directory entries
// and mount lists: each element is preceded by TRUE, the list ends with FALSE.
// Decoding stops with too_long past `max` elements.
template <class X, class T>
void xdr_list(X& x, std::vector<T>& v, std::size_t max) {
  if constexpr (std::is_same_v<X, Encoder>) {
    NFSRDMA_CHECK(v.size() <= max);
    for (auto& e : v) {
      x.boolean(true);
      codec(x, e);
    }
    x.boolean(false);
  } else {
    v.clear();
    for (;;) {
      bool more = false;
      x.boolean(more);
      if (!x.ok() || !more) return;
      if (v.size() == max) return x.fail(Fault::too_long);
      codec(x, v.emplace_back());
      if (!x.ok()) return;
    }
  }
}

template <class T>
void encode(std::vector<std::uint8_t>& out, const T& v) {
  Encoder e(out);
  codec(e, const_cast<T&>(v));
}

template <class T>
Result<void> decode(Decoder& d, T& v) {
  codec(d, v);
  return d.result();
}

template <class T>
Result<void> decode(std::span<const std::uint8_t> in, T& v) {
  Decoder d(in);
  return decode(d, v);
}

template <class T>
Result<void> decode(const Parts& in, T& v) {
  Decoder d(in);
  return decode(d, v);
}

}  // namespace nfsrdma::xdr
