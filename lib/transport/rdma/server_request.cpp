// A request of ServerConnection, moved on by one function (advance) through
// the states of server_connection.hpp, on the connection's event loop.
#include <chrono>
#include <cstring>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"
#include "lib/transport/rdma/server_connection.hpp"

namespace nfsrdma::rdma {

using rpcrdma::Header;

const char* server_detail::state_name(State s) {
  switch (s) {
    case State::free: return "free";
    case State::received: return "received";
    case State::pull_buffer: return "pull_buffer";
    case State::posting: return "posting";
    case State::pulling: return "pulling";
    case State::pulled: return "pulled";
    case State::area_buffer: return "area_buffer";
    case State::ready: return "ready";
    case State::executing: return "executing";
    case State::replied: return "replied";
    case State::pushing_data: return "pushing_data";
    case State::data_placed: return "data_placed";
    case State::reply_buffer: return "reply_buffer";
    case State::pushing_reply: return "pushing_reply";
    case State::reply_pushed: return "reply_pushed";
    case State::send_queued: return "send_queued";
    case State::sending: return "sending";
  }
  return "?";
}

void ServerConnection::advance(Request& r) {
  // Each step does its work and names the state it leads to; free: the
  // request ended there (released, or answered with an error).
  auto go = [&](State next) {
    if (next != State::free) to(r, next);
    return next != State::free;
  };
  for (;;) {
    switch (r.state) {
      case State::received:
        if (!go(take_call(r))) return;
        break;
      case State::pull_buffer:
        if (!buffer(r, r.want) || !go(start_pull(r))) return;
        break;
      case State::posting:
        if (!post_rma(r)) return;
        to(r, r.after_post);
        break;
      case State::pulled:
        if (!go(rebuild_call(r))) return;
        break;
      case State::area_buffer:
        if (!buffer(r, r.want)) return;
        to(r, State::ready);
        break;
      case State::ready:
        to(r, State::executing);
        dispatch(r);  // replied, when the handler ran it here
        break;
      case State::replied:
        if (!go(place_reply(r))) return;
        break;
      case State::data_placed:
        if (!go(finish_reply(r))) return;
        break;
      case State::reply_buffer:
        if (!buffer(r, r.reply_len) || !go(copy_reply(r))) return;
        break;
      case State::reply_pushed:
        if (!go(send_reply(r, rpcrdma::RDMA_NOMSG))) return;
        break;
      case State::send_queued:
        if (!post_reply(r)) return;
        to(r, State::sending);
        break;
      case State::free:
      case State::pulling:
      case State::executing:
      case State::pushing_data:
      case State::pushing_reply:
      case State::sending:
        return;  // ended, or waiting for completions or the handler
    }
  }
}

void ServerConnection::on_recv(SlotCtx& ctx, std::size_t len) {
  auto bytes = recv_pool_->slot(ctx.slot).first(len);
  rpcrdma::Decoded d = rpcrdma::decode_header(bytes);
  const auto& lim = server_.options_;
  if (d.failure == rpcrdma::DecodeFailure::too_short) {
    NFSRDMA_LOG_LIMITED(info, "rdma: {} sent a {}-byte message, too short for a header", peer_.describe(), len);
    return repost_recv(ctx.slot);
  }
  if (d.failure == rpcrdma::DecodeFailure::bad_version) {
    NFSRDMA_LOG_LIMITED(info, "rdma: {} speaks RPC-over-RDMA version {}", peer_.describe(), d.header.vers);
    send_error(d.header.xid, rpcrdma::ERR_VERS);
    return repost_recv(ctx.slot);
  }
  Result<void> valid = d.failure == rpcrdma::DecodeFailure::none
                           ? rpcrdma::validate_call(d.header, {lim.payload_bytes, lim.payload_bytes})
                           : Result<void>(Error{ErrorDomain::rpc, 0, Action::fail, "unparseable transport header"});
  if (!valid) {
    NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: {}", peer_.describe(), d.header.xid,
                        valid.error().message);
    send_error(d.header.xid, rpcrdma::ERR_CHUNK);
    return repost_recv(ctx.slot);
  }
  Request* r = take_request();
  if (!r) {
    NFSRDMA_LOG_LIMITED(warn, "rdma: {} has more calls in flight than the {} credits granted (and {} more); closing",
                        peer_.describe(), granted_, usable_requests() - granted_);
    closing_ = true;
    return;
  }
  maybe_grow();
  r->hdr = d.header;
  r->recv_slot = ctx.slot;
  r->recv_len = len;
  r->header_bytes = d.header_bytes;
  r->holds_recv = true;
  to(*r, State::received);
  advance(*r);
}

void ServerConnection::on_rma_done(Request& r) {
  ++sq_free_;
  if (--r.rma_left != 0) return;
  r.rma_since_ns = 0;
  switch (r.state) {
    case State::pulling: to(r, State::pulled); break;
    case State::pushing_data: to(r, State::data_placed); break;
    case State::pushing_reply: to(r, State::reply_pushed); break;
    default: NFSRDMA_CHECK(false);
  }
  advance(r);
}

State ServerConnection::take_call(Request& r) {
  if (!r.hdr.read_list.empty()) {
    r.want = rpcrdma::read_chunk_length(r.hdr.read_list, r.hdr.read_list[0].position);
    return State::pull_buffer;
  }
  auto bytes = recv_pool_->slot(r.recv_slot).subspan(r.header_bytes, r.recv_len - r.header_bytes);
  r.message.assign(bytes.begin(), bytes.end());
  repost_recv(r);
  return lend_area(r);
}

// The call is whole. Where a Write chunk is offered and the payload buffer
// holds no Read chunk's data, a payload buffer is lent first, so READ data is
// read straight into registered memory (rpc::IncomingCall::reply_area).
State ServerConnection::lend_area(Request& r) {
  if (r.hdr.write_list.empty() || r.placed_at) return State::ready;
  r.want = r.hdr.write_list[0].length();
  return State::area_buffer;
}

State ServerConnection::start_pull(Request& r) {
  const auto& first = r.hdr.read_list[0];
  std::uint64_t len = rpcrdma::read_chunk_length(r.hdr.read_list, first.position);
  if (len > payload(r).size()) return fail(r, "Read chunk larger than a payload buffer");
  r.pull_segs.clear();
  for (const auto& rs : r.hdr.read_list) r.pull_segs.push_back(rs.target);
  r.rma_write = false;
  r.rma_len = static_cast<std::uint32_t>(len);
  r.rma_segs = std::span<const rpcrdma::Segment>(r.pull_segs.begin(), r.pull_segs.size());
  r.rma_ops = r.rma_left = count_chunk_ops(len, r.rma_segs, ep_->max_rma_bytes());
  r.rma_posted = 0;
  r.rma_since_ns = steady_ns();
  r.after_post = State::pulling;
  return State::posting;
}

// The call again: the inline part with the chunk's data at its position
// (RFC 8166 §3.4.5), the round-up restored; position zero is the whole call.
State ServerConnection::rebuild_call(Request& r) {
  auto inline_part = recv_pool_->slot(r.recv_slot).subspan(r.header_bytes, r.recv_len - r.header_bytes);
  const std::uint32_t pos = r.hdr.read_list[0].position;
  auto data = payload(r).first(rpcrdma::read_chunk_length(r.hdr.read_list, pos));
  if (r.hdr.proc == rpcrdma::RDMA_NOMSG) {
    r.message.assign(data.begin(), data.end());
    give_back(r);
  } else {
    if (pos > inline_part.size()) return fail(r, "Read chunk position beyond the inline message");
    // The data stays where the RDMA Read put it; the call keeps the buffer.
    r.message.assign(inline_part.begin(), inline_part.end());
    r.placed_at = pos;
  }
  repost_recv(r);
  return lend_area(r);  // a position-zero call's buffer is free again
}

void ServerConnection::dispatch(Request& r) {
  rpc::IncomingCall call;
  std::span<const std::uint8_t> inline_part(r.message);
  call.message = xdr::Parts{inline_part};
  if (r.placed_at) {
    call.message = {inline_part.first(*r.placed_at),
                    payload(r).first(rpcrdma::read_chunk_length(r.hdr.read_list, *r.placed_at)),
                    inline_part.subspan(*r.placed_at)};
  }
  call.reply_buffer = std::move(r.body);
  call.channel = std::shared_ptr<rpc::ReplyChannel>(shared_from_this(), &r.channel);
  call.listener = 1;  // NFS: MOUNT and PORTMAP stay on TCP (RFC 8267 §2)
  call.rdma = true;
  call.secure = true;
  if (has_payload(r) && !r.hdr.write_list.empty() && !r.placed_at) {
    auto slot = payload(r);
    call.reply_area = slot.first(std::min<std::uint64_t>(slot.size(), r.hdr.write_list[0].length()));
  }
  server_.handler_(std::move(call));
}

State ServerConnection::place_reply(Request& r) {
  if (r.dropped || closing_) return release(r);
  rpc::ReplyMessage& m = r.reply;
  r.write_len = 0;
  r.reply_len = 0;
  r.body = std::move(m.bytes);
  if (!m.payload.empty()) {
    // The data is in the buffer lent for the Write chunk, which is no larger
    // than the chunk: RDMA Write it from there.
    NFSRDMA_CHECK(has_payload(r) && m.payload.data() == payload(r).data() && !r.hdr.write_list.empty());
    r.write_len = static_cast<std::uint32_t>(m.payload.size());
    m.payload = {};
    std::span<const rpcrdma::Segment> segs(r.hdr.write_list[0].segments.begin(), r.hdr.write_list[0].segments.size());
    return push(r, r.write_len, segs, State::pushing_data, State::data_placed);
  }
  // No data apart: the reply travels whole.
  give_back(r);  // a lent buffer the reply did not use, or the Read chunk's data
  return State::data_placed;
}

// Chaining needs the provider's ordering, and a reply that then goes inline:
// one that needs the Reply chunk too would want a second payload buffer while
// the Write chunk's is still held. It pays where a Write completes only once
// the peer acknowledged it (verbs RC: a round trip the Send no longer waits
// for); the tcp provider completes a Write locally, so waiting costs no round
// trip there, and chaining measured 0.88x at 1 MiB reads: it waits.
bool ServerConnection::chain(const Request& r, bool reply_chunk) const {
  return chain_writes_ && (reply_chunk || fits_inline(r));
}

bool ServerConnection::fits_inline(const Request& r) const {
  // Our header is at most this long: fixed words plus the Write list echoed
  // (each chunk's present flag, count and segments), as the client counts it
  // when it plans a Write chunk alone (rpcrdma::kHeaderReserve).
  std::size_t header_max = rpcrdma::kMinHeaderBytes;
  for (const auto& c : r.hdr.write_list) header_max += 8 + 16 * c.segments.size();
  return header_max + r.body.size() <= peer_recv_inline_;
}

State ServerConnection::push(Request& r, std::uint32_t len, std::span<const rpcrdma::Segment> segs, State waiting,
                             State done) {
  r.chained = chain(r, waiting == State::pushing_reply);
  r.rma_write = true;
  r.rma_len = len;
  r.rma_segs = segs;
  r.rma_ops = count_chunk_ops(len, segs, ep_->max_rma_bytes());
  r.rma_left = r.chained ? 0 : r.rma_ops;
  r.rma_posted = 0;
  // Chained, this stays set until the Send completes: a Write the peer never
  // takes holds the Send behind it, and check_rma_deadline() sees it.
  r.rma_since_ns = steady_ns();
  r.after_post = r.chained ? done : waiting;
  return State::posting;
}

State ServerConnection::finish_reply(Request& r) {
  if (!r.chained) give_back(r);
  if (fits_inline(r)) return send_reply(r, rpcrdma::RDMA_MSG);
  if (!r.hdr.reply_chunk || r.body.size() > r.hdr.reply_chunk->length()) {
    NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: a {}-byte reply needs a {}", peer_.describe(),
                        r.hdr.xid, r.body.size(), r.hdr.reply_chunk ? "larger Reply chunk" : "Reply chunk");
    send_error(r.hdr.xid, rpcrdma::ERR_CHUNK);
    return release(r);
  }
  r.reply_len = static_cast<std::uint32_t>(r.body.size());
  return State::reply_buffer;
}

State ServerConnection::copy_reply(Request& r) {
  auto buf = payload(r);
  if (r.body.size() > buf.size()) return fail(r, "reply larger than a payload buffer");
  std::memcpy(buf.data(), r.body.data(), r.body.size());
  std::span<const rpcrdma::Segment> segs(r.hdr.reply_chunk->segments.begin(), r.hdr.reply_chunk->segments.size());
  return push(r, r.reply_len, segs, State::pushing_reply, State::reply_pushed);
}

// Returns a chunk with its segment lengths cut to the `used` bytes (RFC 8166 §3.4.6).
static rpcrdma::WriteChunk used_part(const rpcrdma::WriteChunk& c, std::uint32_t used) {
  rpcrdma::WriteChunk out;
  for (auto s : c.segments) {
    s.length = std::min(s.length, used);
    used -= s.length;
    out.segments.push_back(s);
  }
  return out;
}

State ServerConnection::send_reply(Request& r, rpcrdma::Proc proc) {
  if (!r.chained) give_back(r);
  Header h;
  h.xid = r.hdr.xid;
  h.credits = granted_;
  h.proc = proc;
  if (!r.hdr.write_list.empty()) h.write_list.push_back(used_part(r.hdr.write_list[0], r.write_len));
  if (proc == rpcrdma::RDMA_NOMSG) h.reply_chunk = used_part(*r.hdr.reply_chunk, r.reply_len);
  auto slot = take_send_slot(false);
  if (!slot) {
    // Cannot happen: every request has a send buffer of its own.
    spdlog::error("rdma: no send buffer for a reply to {}; closing", peer_.describe());
    closing_ = true;
    return release(r);
  }
  std::vector<std::uint8_t>& head = r.head;
  head.clear();
  xdr::Encoder e(head);
  rpcrdma::encode_header(e, h);
  auto buf = send_pool_->slot(*slot);
  std::size_t body = proc == rpcrdma::RDMA_MSG ? r.body.size() : 0;
  NFSRDMA_CHECK(head.size() + body <= buf.size());
  std::memcpy(buf.data(), head.data(), head.size());
  if (body) std::memcpy(buf.data() + head.size(), r.body.data(), body);
  r.body.clear();
  // The request (and its credit) ends when the Send completes: on_send_done.
  r.send_slot = *slot;
  r.send_len = head.size() + body;
  return State::send_queued;
}

// Some of its RMAs may be posted, still moving data to or from its buffer:
// the connection goes, and the buffer goes back with the rest (drain).
void ServerConnection::broken(Request& r, const char* why) {
  NFSRDMA_LOG_LIMITED(warn, "rdma: {} for xid {:#x} from {}; closing the connection", why, r.hdr.xid, peer_.describe());
  closing_ = true;
}

State ServerConnection::fail(Request& r, const char* why) {
  NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: {}", peer_.describe(), r.hdr.xid, why);
  repost_recv(r);
  send_error(r.hdr.xid, rpcrdma::ERR_CHUNK);
  return release(r);
}

}  // namespace nfsrdma::rdma
