#include "lib/rpcrdma/marshal.hpp"

#include "lib/base/result.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpcrdma {

MarshaledCall marshal_call(std::uint32_t xid, std::uint32_t credits, const Plan& plan, std::uint32_t call_bytes,
                           const ChunkTargets& t) {
  NFSRDMA_CHECK(!plan.read_bytes == !t.read && !plan.write_bytes == !t.write && !plan.reply_bytes == !t.reply);
  MarshaledCall m;
  Header& h = m.header;
  h.xid = xid;
  h.credits = credits;
  h.proc = plan.proc;
  m.head_end = call_bytes;
  m.tail_from = call_bytes;
  if (t.read) {
    if (plan.proc == RDMA_NOMSG) {
      m.head_end = 0;
    } else {
      m.read_from = plan.read_position;
      m.head_end = plan.read_position;
      m.tail_from = plan.read_position + static_cast<std::uint32_t>(xdr::pad4(plan.read_bytes));
    }
    h.read_list.push_back({plan.read_position, {t.read->handle, plan.read_bytes, t.read->offset}});
  }
  if (t.write) {
    WriteChunk w;
    w.segments.push_back({t.write->handle, plan.write_bytes, t.write->offset});
    h.write_list.push_back(w);
  }
  if (t.reply) {
    WriteChunk r;
    r.segments.push_back({t.reply->handle, plan.reply_bytes, t.reply->offset});
    h.reply_chunk = r;
  }
  return m;
}

Offers offers_of(const Header& call) {
  Offers o;
  if (!call.write_list.empty() && !call.write_list[0].segments.empty()) o.write = call.write_list[0].segments[0];
  if (call.reply_chunk && !call.reply_chunk->segments.empty()) o.reply = call.reply_chunk->segments[0];
  return o;
}

namespace {
bool beyond(const WriteChunk& c, const std::optional<Segment>& offered) {
  if (c.segments.empty()) return false;
  if (!offered || c.segments.size() != 1) return true;
  const Segment& s = c.segments[0];
  return s.handle != offered->handle || s.offset != offered->offset || s.length > offered->length;
}

ReplyLayout fault(ReplyFault f, const char* why = "") {
  ReplyLayout r;
  r.fault = f;
  r.why = why;
  return r;
}
}  // namespace

ReplyLayout read_reply(const Decoded& d, const Offers& offered) {
  if (d.failure != DecodeFailure::none) return fault(ReplyFault::unparseable);
  const Header& h = d.header;
  if (h.proc == RDMA_ERROR) return fault(h.error == ERR_VERS ? ReplyFault::err_vers : ReplyFault::err_chunk);
  if (h.write_list.size() > 1 || (!h.write_list.empty() && beyond(h.write_list[0], offered.write))) {
    return fault(ReplyFault::overclaim, "returned a Write chunk beyond what the call offered");
  }
  if (h.reply_chunk && beyond(*h.reply_chunk, offered.reply)) {
    return fault(ReplyFault::overclaim, "returned a Reply chunk beyond what the call offered");
  }
  ReplyLayout r;
  if (h.proc == RDMA_NOMSG) {
    if (!h.reply_chunk || h.reply_chunk->segments.empty()) {
      return fault(ReplyFault::unexpected, "sent RDMA_NOMSG without a Reply chunk");
    }
    r.in_reply_chunk = true;
    r.reply_bytes = h.reply_chunk->length();
    return r;
  }
  if (h.proc != RDMA_MSG) return fault(ReplyFault::unexpected, "sent a reply that is neither RDMA_MSG nor RDMA_NOMSG");
  r.inline_from = d.header_bytes;
  r.write_bytes = h.write_list.empty() ? 0 : h.write_list[0].length();
  return r;
}

}  // namespace nfsrdma::rpcrdma
