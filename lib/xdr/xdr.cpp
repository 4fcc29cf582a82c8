// RFC 4506 primitives: big-endian 4-byte units, opaque data padded to 4.
#include "lib/xdr/xdr.hpp"

#include <algorithm>

namespace nfsrdma::xdr {

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::none: return "ok";
    case Fault::truncated: return "truncated";
    case Fault::too_long: return "length over limit";
    case Fault::bad_value: return "value out of range";
  }
  return "?";
}

Result<void> Decoder::result() const {
  if (ok()) return {};
  return Error{ErrorDomain::xdr, static_cast<int>(fault_), Action::fail,
               std::string("xdr: ") + fault_name(fault_) + " at byte " + std::to_string(pos_)};
}

const std::uint8_t* Decoder::take(std::size_t n) {
  if (fault_ != Fault::none) return nullptr;
  if (placed_pending_ && pos_ <= placed_at_ && placed_at_ < pos_ + n) {
    fail(Fault::bad_value);  // an item other than the placed opaque's body at its position
    return nullptr;
  }
  if (n > remaining()) {
    fail(Fault::truncated);
    return nullptr;
  }
  const std::uint8_t* p = in_.data() + pos_;
  pos_ += n;
  return p;
}

void Decoder::u32(std::uint32_t& v) {
  const std::uint8_t* p = take(4);
  v = p ? load_be32(p) : 0;
}

void Decoder::i32(std::int32_t& v) {
  std::uint32_t u = 0;
  u32(u);
  v = static_cast<std::int32_t>(u);
}

void Decoder::u64(std::uint64_t& v) {
  std::uint32_t hi = 0, lo = 0;
  u32(hi);
  u32(lo);
  v = (std::uint64_t{hi} << 32) | lo;
}

void Decoder::i64(std::int64_t& v) {
  std::uint64_t u = 0;
  u64(u);
  v = static_cast<std::int64_t>(u);
}

void Decoder::boolean(bool& v) {
  std::uint32_t u = 0;
  u32(u);
  if (u > 1) fail(Fault::bad_value);
  v = (u == 1);
}

void Decoder::fixed(std::span<std::uint8_t> out) {
  const std::uint8_t* p = take(pad4(out.size()));
  if (p) {
    std::memcpy(out.data(), p, out.size());
  } else {
    std::memset(out.data(), 0, out.size());
  }
}

void Decoder::opaque_view(std::span<const std::uint8_t>& view, std::uint32_t max) {
  std::uint32_t n = 0;
  u32(n);
  view = {};
  if (!ok()) return;
  if (n > max) return fail(Fault::too_long);
  if (placed_pending_ && pos_ == placed_at_) {
    if (n != placed_.size()) return fail(Fault::bad_value);
    placed_pending_ = false;
    view = placed_;
    return;
  }
  // WARNING: pad4 of a length near 2^32 must not wrap; n <= max keeps it in range
  // only if max is sane, so compare against what is left in 64-bit arithmetic.
  if (std::uint64_t{n} > remaining()) return fail(Fault::truncated);
  const std::uint8_t* p = take(pad4(n));
  if (p) view = {p, n};
}

void Parts::copy(std::size_t from, std::size_t n, std::uint8_t* out) const {
  static constexpr std::uint8_t kZeros[4] = {};
  const std::span<const std::uint8_t> parts[] = {head, payload, std::span(kZeros).first(pad4(payload.size()) - payload.size()),
                                                 tail};
  for (auto part : parts) {
    if (n == 0) return;
    if (from >= part.size()) {
      from -= part.size();
      continue;
    }
    std::size_t k = std::min(n, part.size() - from);
    std::memcpy(out, part.data() + from, k);
    out += k;
    n -= k;
    from = 0;
  }
}

Decoder::Decoder(const Parts& m) : in_(m.head) {
  if (!m.split()) return;
  NFSRDMA_CHECK(m.tail.empty() || m.head.data() + m.head.size() == m.tail.data());
  in_ = {m.head.data(), m.head.size() + m.tail.size()};
  placed_ = m.payload;
  placed_at_ = m.head.size();
  placed_pending_ = true;
}

Parts Decoder::unread() const {
  if (!placed_pending_ || pos_ > placed_at_) return Parts{rest()};
  return Parts{in_.subspan(pos_, placed_at_ - pos_), placed_, in_.subspan(placed_at_)};
}

void Decoder::opaque(std::vector<std::uint8_t>& out, std::uint32_t max) {
  std::span<const std::uint8_t> v;
  opaque_view(v, max);
  out.assign(v.begin(), v.end());
}

void Decoder::string(std::string& out, std::uint32_t max) {
  std::span<const std::uint8_t> v;
  opaque_view(v, max);
  out.assign(reinterpret_cast<const char*>(v.data()), v.size());
}

std::uint32_t Decoder::count(std::size_t, std::uint32_t max, std::size_t min_element_bytes) {
  std::uint32_t n = 0;
  u32(n);
  if (!ok()) return 0;
  if (n > max) {
    fail(Fault::too_long);
    return 0;
  }
  if (min_element_bytes > 0 && std::uint64_t{n} * min_element_bytes > remaining()) {
    fail(Fault::truncated);
    return 0;
  }
  return n;
}

void Decoder::skip(std::size_t n) { take(pad4(n)); }

void Encoder::u64(std::uint64_t v) {
  u32(static_cast<std::uint32_t>(v >> 32));
  u32(static_cast<std::uint32_t>(v));
}

void Encoder::fixed(std::span<const std::uint8_t> in) {
  static const std::uint8_t kZeros[4] = {};
  out_.insert(out_.end(), in.begin(), in.end());
  out_.insert(out_.end(), kZeros, kZeros + (pad4(in.size()) - in.size()));
}

void Encoder::opaque_view(std::span<const std::uint8_t> in, std::uint32_t max) {
  NFSRDMA_CHECK(in.size() <= max);
  u32(static_cast<std::uint32_t>(in.size()));
  fixed(in);
}

void Encoder::string(const std::string& in, std::uint32_t max) {
  opaque_view({reinterpret_cast<const std::uint8_t*>(in.data()), in.size()}, max);
}

std::size_t Encoder::reserve_opaque(std::uint32_t max) {
  std::size_t at = out_.size();
  out_.resize(at + 4 + pad4(max));
  return at;
}

std::span<std::uint8_t> Encoder::reserved(std::size_t at, std::uint32_t max) {
  return {out_.data() + at + 4, max};
}

void Encoder::commit_opaque(std::size_t at, std::uint32_t n) {
  NFSRDMA_CHECK(at + 4 + n <= out_.size());
  store_be32(out_.data() + at, n);
  std::size_t end = at + 4 + pad4(n);
  std::memset(out_.data() + at + 4 + n, 0, end - (at + 4 + n));
  out_.resize(end);
}

void Encoder::patch_u32(std::size_t at, std::uint32_t v) {
  NFSRDMA_CHECK(at + 4 <= out_.size());
  store_be32(out_.data() + at, v);
}

}  // namespace nfsrdma::xdr
