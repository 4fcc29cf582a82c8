#include "lib/rpcrdma/header.hpp"

#include <string>

namespace nfsrdma::rpcrdma {
namespace {

Error chunk_error(std::string what) { return Error{ErrorDomain::rpc, 0, Action::fail, "rpcrdma: " + what}; }

void codec(xdr::Decoder& x, Segment& s) {
  x.u32(s.handle);
  x.u32(s.length);
  x.u64(s.offset);
}

void codec(xdr::Encoder& x, const Segment& s) {
  x.u32(s.handle);
  x.u32(s.length);
  x.u64(s.offset);
}

// A counted array of segments (xdr_write_chunk); false when over our cap.
bool decode_chunk(xdr::Decoder& x, WriteChunk& c) {
  std::uint32_t n = x.count(0, kMaxChunkSegments, 16);
  if (!x.ok()) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    Segment s;
    codec(x, s);
    c.segments.push_back(s);
  }
  return x.ok();
}

void encode_chunk(xdr::Encoder& x, const WriteChunk& c) {
  x.u32(static_cast<std::uint32_t>(c.segments.size()));
  for (const auto& s : c.segments) codec(x, s);
}

bool decode_lists(xdr::Decoder& x, Header& h) {
  // Read list: a linked list of (position, segment).
  for (;;) {
    bool more = false;
    x.boolean(more);
    if (!x.ok()) return false;
    if (!more) break;
    ReadSegment r;
    x.u32(r.position);
    codec(x, r.target);
    if (!x.ok() || !h.read_list.push_back(r)) return false;
  }
  // Write list: a linked list of chunks.
  for (;;) {
    bool more = false;
    x.boolean(more);
    if (!x.ok()) return false;
    if (!more) break;
    if (h.write_list.full()) return false;
    WriteChunk c;
    if (!decode_chunk(x, c)) return false;
    h.write_list.push_back(c);
  }
  // Reply chunk: optional.
  bool present = false;
  x.boolean(present);
  if (!x.ok()) return false;
  if (present) {
    WriteChunk c;
    if (!decode_chunk(x, c)) return false;
    h.reply_chunk = c;
  }
  return true;
}

}  // namespace

std::uint64_t WriteChunk::length() const {
  std::uint64_t n = 0;
  for (const auto& s : segments) n += s.length;
  return n;
}

Decoded decode_header(std::span<const std::uint8_t> in) {
  Decoded out;
  Header& h = out.header;
  xdr::Decoder x(in);
  x.u32(h.xid);
  x.u32(h.vers);
  if (!x.ok()) {
    out.failure = DecodeFailure::too_short;
    return out;
  }
  if (h.vers != kVersion) {
    out.failure = DecodeFailure::bad_version;
    return out;
  }
  x.u32(h.credits);
  std::uint32_t proc = 0;
  x.u32(proc);
  h.proc = static_cast<Proc>(proc);
  bool ok = x.ok();
  switch (h.proc) {
    case RDMA_MSG:
    case RDMA_NOMSG:
      ok = ok && decode_lists(x, h);
      break;
    case RDMA_ERROR: {
      std::uint32_t code = 0;
      x.u32(code);
      h.error = static_cast<ErrorCode>(code);
      if (h.error == ERR_VERS) {
        x.u32(h.vers_low);
        x.u32(h.vers_high);
      } else if (h.error != ERR_CHUNK) {
        ok = false;
      }
      ok = ok && x.ok();
      break;
    }
    default:  // RDMA_MSGP and RDMA_DONE are deprecated (RFC 8166 §4.5): unsupported
      ok = false;
  }
  if (!ok) {
    out.failure = DecodeFailure::bad_header;
    return out;
  }
  out.header_bytes = x.position();
  return out;
}

void encode_header(xdr::Encoder& e, const Header& h) {
  e.u32(h.xid);
  e.u32(h.vers);
  e.u32(h.credits);
  e.enumeration(h.proc);
  if (h.proc == RDMA_ERROR) {
    e.enumeration(h.error);
    if (h.error == ERR_VERS) {
      e.u32(h.vers_low);
      e.u32(h.vers_high);
    }
    return;
  }
  NFSRDMA_CHECK(h.proc == RDMA_MSG || h.proc == RDMA_NOMSG);
  for (const auto& r : h.read_list) {
    e.boolean(true);
    e.u32(r.position);
    codec(e, r.target);
  }
  e.boolean(false);
  for (const auto& c : h.write_list) {
    e.boolean(true);
    encode_chunk(e, c);
  }
  e.boolean(false);
  e.boolean(h.reply_chunk.has_value());
  if (h.reply_chunk) encode_chunk(e, *h.reply_chunk);
}

std::uint64_t read_chunk_length(const ReadList& list, std::uint32_t position) {
  std::uint64_t n = 0;
  for (const auto& r : list) {
    if (r.position == position) n += r.target.length;
  }
  return n;
}

Result<void> validate_call(const Header& h, const Limits& limits) {
  if (h.proc != RDMA_MSG && h.proc != RDMA_NOMSG) return chunk_error("a call must be RDMA_MSG or RDMA_NOMSG");
  auto check_segment = [&](const Segment& s) -> Result<void> {
    if (s.length > limits.max_segment_bytes) {
      return chunk_error("segment of " + std::to_string(s.length) + " bytes exceeds the limit");
    }
    if (s.offset + s.length < s.offset) return chunk_error("segment wraps the address space");
    return {};
  };
  std::uint32_t last_position = 0;
  for (std::size_t i = 0; i < h.read_list.size(); ++i) {
    const ReadSegment& r = h.read_list[i];
    if (auto c = check_segment(r.target); !c) return c;
    if (r.position % 4 != 0) return chunk_error("Read chunk position not on an XDR boundary");
    if (i > 0 && r.position < last_position) return chunk_error("Read list not sorted by position");
    last_position = r.position;
  }
  // RFC 8267 §2: NFSv3 has one DDP-eligible item per call, so one Read chunk.
  for (const auto& r : h.read_list) {
    if (r.position != h.read_list[0].position) return chunk_error("more than one Read chunk");
  }
  if (!h.read_list.empty() && read_chunk_length(h.read_list, h.read_list[0].position) > limits.max_chunk_bytes) {
    return chunk_error("Read chunk larger than the limit");
  }
  for (const auto& c : h.write_list) {
    for (const auto& s : c.segments) {
      if (auto r = check_segment(s); !r) return r;
    }
    if (c.length() > limits.max_chunk_bytes) return chunk_error("Write chunk larger than the limit");
  }
  if (h.write_list.size() > 1) return chunk_error("more than one Write chunk");
  if (h.reply_chunk) {
    for (const auto& s : h.reply_chunk->segments) {
      if (auto r = check_segment(s); !r) return r;
    }
    if (h.reply_chunk->length() > limits.max_chunk_bytes) return chunk_error("Reply chunk larger than the limit");
  }
  if (h.proc == RDMA_NOMSG) {
    bool whole_call = !h.read_list.empty() && h.read_list[0].position == 0;
    if (!whole_call) return chunk_error("RDMA_NOMSG call without a position-zero Read chunk");
  } else if (!h.read_list.empty() && h.read_list[0].position == 0) {
    return chunk_error("position-zero Read chunk in an RDMA_MSG");
  }
  return {};
}

}  // namespace nfsrdma::rpcrdma
