// The RPC-over-RDMA version 1 transport header (RFC 8166 §4): xid, version,
// credits, and the chunk lists (Read list, Write list, Reply chunk) or an
// RDMA_ERROR. Pure: bytes in, bytes out.
//
// Decoding parses into fixed-capacity lists: a peer cannot make us allocate,
// and a list longer than our caps is ERR_CHUNK, as is anything unparseable.
// validate() then checks what the lists mean (positions, lengths, caps) before
// any segment is used for RDMA.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lib/base/static_vector.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpcrdma {

constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxReadSegments = 32;   // Read list entries
constexpr std::size_t kMaxWriteChunks = 4;     // chunks in the Write list
constexpr std::size_t kMaxChunkSegments = 32;  // segments in one Write or Reply chunk
constexpr std::size_t kMinHeaderBytes = 28;    // xid, vers, credits, proc, three empty lists

enum class Proc : std::uint32_t { RDMA_MSG = 0, RDMA_NOMSG = 1, RDMA_MSGP = 2, RDMA_DONE = 3, RDMA_ERROR = 4 };
using enum Proc;
enum class ErrorCode : std::uint32_t { ERR_VERS = 1, ERR_CHUNK = 2 };
using enum ErrorCode;

// An RDMA segment (RFC 8166 §3.4.3): handle = the peer's 32-bit memory key,
// offset = its virtual address (or offset in the region).
struct Segment {
  std::uint32_t handle = 0;
  std::uint32_t length = 0;
  std::uint64_t offset = 0;
  bool operator==(const Segment&) const = default;
};

// One entry of the Read list: a segment and the XDR position of its data.
struct ReadSegment {
  std::uint32_t position = 0;
  Segment target;
  bool operator==(const ReadSegment&) const = default;
};

using ReadList = StaticVector<ReadSegment, kMaxReadSegments>;

struct WriteChunk {
  StaticVector<Segment, kMaxChunkSegments> segments;
  std::uint64_t length() const;
};
using WriteList = StaticVector<WriteChunk, kMaxWriteChunks>;
using ReplyChunk = std::optional<WriteChunk>;

struct Header {
  std::uint32_t xid = 0;
  std::uint32_t vers = kVersion;
  std::uint32_t credits = 0;
  Proc proc = RDMA_MSG;
  // RDMA_MSG and RDMA_NOMSG
  ReadList read_list;
  WriteList write_list;
  ReplyChunk reply_chunk;
  // RDMA_ERROR
  ErrorCode error = ERR_CHUNK;
  std::uint32_t vers_low = kVersion, vers_high = kVersion;  // ERR_VERS
};

// What went wrong while decoding, and so what the responder answers.
enum class DecodeFailure : std::uint8_t {
  none,
  too_short,    // fewer bytes than xid + vers: nothing can be answered
  bad_version,  // answer ERR_VERS
  bad_header,   // answer ERR_CHUNK
};

struct Decoded {
  Header header;
  std::size_t header_bytes = 0;  // where the RPC message (if any) starts
  DecodeFailure failure = DecodeFailure::none;
};

// Decodes a transport header at the start of `in`. On failure the xid is still
// filled in when the input had one, so an RDMA_ERROR can echo it.
Decoded decode_header(std::span<const std::uint8_t> in);
void encode_header(xdr::Encoder& e, const Header& h);

struct Limits {
  std::uint64_t max_segment_bytes = 1u << 20;  // one segment
  std::uint64_t max_chunk_bytes = 4u << 20;    // one chunk, all segments
};

// Checks the meaning of a decoded call header (a requester's): Read segments
// sorted by position, on 4-byte boundaries, one chunk per position, lengths
// within limits; an RDMA_NOMSG carries a position-zero Read chunk (the whole
// call) or a Reply chunk; no RDMA_MSGP/RDMA_DONE. Returns ERR_CHUNK reasons.
Result<void> validate_call(const Header& h, const Limits& limits);

// The bytes of the Read chunk at `position` (all segments at that position).
std::uint64_t read_chunk_length(const ReadList& list, std::uint32_t position);

}  // namespace nfsrdma::rpcrdma
