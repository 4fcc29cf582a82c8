// The requester's half of RFC 8166 §3.4-3.5 and §4, after plan_call():
// marshal_call() turns a Plan and the memory its chunks point at into the
// transport header and the inline layout of the call; read_reply() checks a
// decoded reply against what its call offered and says where the RPC reply
// is. Pure: the transport owns the buffers and the memory registration.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lib/rpcrdma/chunk_plan.hpp"
#include "lib/rpcrdma/header.hpp"

namespace nfsrdma::rpcrdma {

// Where a chunk points: a memory key and an address in it. The length is the
// plan's.
struct Target {
  std::uint32_t handle = 0;
  std::uint64_t offset = 0;
};

// One target for each chunk the plan has (read_bytes, write_bytes,
// reply_bytes not 0), none for the others.
struct ChunkTargets {
  std::optional<Target> read, write, reply;
};

struct MarshaledCall {
  Header header;
  // The bytes of the RPC call (an XDR stream of `call_bytes`) that go inline
  // after the header: [0, head_end) then [tail_from, call_bytes).
  std::uint32_t head_end = 0, tail_from = 0;
  // The Read chunk carries `plan.read_bytes` of the call from here.
  std::uint32_t read_from = 0;
};

// `credits`: the grant asked for (our maximum in flight). RDMA_MSG with a Read
// chunk leaves the chunk's data and its round-up out of the inline part
// (§3.4.5.2); RDMA_NOMSG sends nothing inline.
MarshaledCall marshal_call(std::uint32_t xid, std::uint32_t credits, const Plan& plan, std::uint32_t call_bytes,
                           const ChunkTargets& targets);

// What a call offered for its reply, one segment each (marshal_call's header
// holds them).
struct Offers {
  std::optional<Segment> write, reply;
};
Offers offers_of(const Header& call);

enum class ReplyFault : std::uint8_t {
  none,
  unparseable,  // the header did not decode: the connection cannot be trusted
  err_vers,     // RDMA_ERROR ERR_VERS: header.vers_low..vers_high are spoken
  err_chunk,    // RDMA_ERROR ERR_CHUNK: the responder refused the call's chunks
  overclaim,    // a returned chunk beyond what the call offered (`why`)
  unexpected,   // a reply the call cannot have (`why`)
};

struct ReplyLayout {
  ReplyFault fault = ReplyFault::none;
  const char* why = "";
  // RDMA_NOMSG: the whole RPC reply is the first `reply_bytes` of the Reply
  // chunk. Else the RPC reply starts `inline_from` bytes into the message,
  // and `write_bytes` of its last item were placed in the Write chunk.
  bool in_reply_chunk = false;
  std::size_t inline_from = 0;
  std::uint64_t write_bytes = 0, reply_bytes = 0;
};

// RFC 8166 §3.4.6: a returned chunk carries the segments its call offered,
// lengths cut to what was placed; more (bytes never written there, or another
// call's memory) is refused.
ReplyLayout read_reply(const Decoded& reply, const Offers& offered);

}  // namespace nfsrdma::rpcrdma
