#include "lib/transport/rdma/server_connection.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "lib/base/log.hpp"

namespace nfsrdma::rdma {

using rpcrdma::Header;

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The reply with its DDP-eligible payload (and the payload's round-up) cut out.
std::vector<std::uint8_t> without_payload(rpc::ReplyMessage& r) {
  if (r.payload_length == 0) return std::move(r.bytes);
  std::vector<std::uint8_t> out(r.bytes.begin(), r.bytes.begin() + static_cast<long>(r.payload_offset));
  std::size_t after = r.payload_offset + xdr::pad4(r.payload_length);
  if (after < r.bytes.size()) out.insert(out.end(), r.bytes.begin() + static_cast<long>(after), r.bytes.end());
  return out;
}


}  // namespace

void RequestChannel::send(rpc::ReplyMessage&& reply) { conn->reply(index, std::move(reply)); }
void RequestChannel::drop() { conn->drop(index); }
void RequestChannel::close() { conn->close(); }
const rpc::Peer& RequestChannel::peer() const { return conn->peer(); }

ConnectionMetrics& connection_metrics() {
  static ConnectionMetrics m{
      metrics::registry().gauge("nfsrdma_server_rdma_connections", "RPC-over-RDMA connections open"),
      metrics::registry().gauge("nfsrdma_server_rdma_credits_granted", "Credits granted, summed over connections"),
      metrics::registry().gauge("nfsrdma_server_rdma_credits_in_use", "Calls in progress, summed over connections")};
  return m;
}

Result<void> ServerConnection::setup(const fabric::ConnectRequest& req) {
  const auto& o = server_.options_;
  peer_recv_inline_ = rpcrdma::peer_receive_inline(rpcrdma::decode_private(req.private_data), o.inline_bytes);
  auto dev = server_.device_for(req);
  if (!dev) return dev.error();
  fabric::Domain& domain = *dev->first;
  payload_ = dev->second;
  auto rp = SlotPool::create(domain, o.credits, o.inline_bytes, false);
  if (!rp) return rp.error();
  recv_pool_ = std::move(*rp);
  // A send buffer for every request's reply, plus some for error replies.
  const std::size_t sends = requests_.size() + kErrorSends;
  auto sp = SlotPool::create(domain, sends, o.inline_bytes, false);
  if (!sp) return sp.error();
  send_pool_ = std::move(*sp);
  auto op = SlotPool::create(domain, requests_.size(), o.small_payload_bytes, true);
  if (!op) return op.error();
  own_payloads_ = std::move(*op);
  recv_ctx_.resize(o.credits);
  send_ctx_.resize(sends);
  for (std::size_t i = 0; i < recv_ctx_.size(); ++i) recv_ctx_[i] = {{{}, CtxKind::recv}, i};
  for (std::size_t i = 0; i < send_ctx_.size(); ++i) send_ctx_[i] = {{{}, CtxKind::send}, i, kNoRequest};
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    Request& r = requests_[i];
    r.kind = CtxKind::rma;
    r.index = i;
    r.channel.conn = this;
    r.channel.index = i;
    r.message.reserve(o.inline_bytes);
    r.body.reserve(o.inline_bytes);
    r.head.reserve(rpcrdma::kMinHeaderBytes + 8 + rpcrdma::kMaxChunkSegments * 16);
    free_requests_.push_back(i);
  }
  rpcrdma::ConnectPrivate mine;
  mine.send_size = o.inline_bytes;
  mine.recv_size = o.inline_bytes;
  auto priv = rpcrdma::encode_private(mine);
  auto ep = fabric::Endpoint::accept(domain, req.info.get(), priv, 5000, requests_.size() * 2 + kErrorSends + 64,
                                     [&](fabric::Endpoint& e) -> Result<void> {
                                       for (std::size_t i = 0; i < recv_ctx_.size(); ++i) {
                                         auto buf = recv_pool_->slot(i);
                                         if (auto r = e.post_recv(&recv_ctx_[i].op, buf.data(), buf.size(),
                                                                  recv_pool_->region().desc());
                                             !r) {
                                           return r;
                                         }
                                       }
                                       return {};
                                     });
  if (!ep) return ep.error();
  ep_ = std::move(*ep);
  chain_writes_ = ep_->orders_send_after_write() && server_.provider_ != "tcp";
  if (!ep_->peer_address(peer_.addr, peer_.len)) peer_.len = 0;
  return {};
}

// RDMA has no answer for an RMA the peer never serves (on the tcp provider, a
// Read of a key nobody issued simply never completes): a request whose RMA
// outlives rma_timeout means a broken or hostile peer, and the connection
// goes, which flushes the RMA and frees the request and its payload buffer.
void ServerConnection::check_rma_deadline() {
  const std::int64_t now = steady_ns();
  if (now - last_deadline_check_ns_ < 100'000'000) return;
  last_deadline_check_ns_ = now;
  const std::int64_t limit = std::chrono::nanoseconds(server_.options_.rma_timeout).count();
  for (auto& r : requests_) {
    std::int64_t since = r.rma_since_ns.load();
    if (since != 0 && now - since > limit && !closing_) {
      NFSRDMA_LOG_LIMITED(warn, "rdma: RDMA {} for xid {:#x} from {} not done after {} ms; closing the connection",
                   r.phase == Phase::pulling ? "Read" : "Write", r.hdr.xid, peer_.describe(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(server_.options_.rma_timeout).count());
      closing_ = true;
    }
  }
}

void ServerConnection::progress_loop() {
  spdlog::debug("rdma: connection from {}", peer_.describe());
  fabric::Completion c[32];
  while (!closing_ && !server_.stopping_) {
    auto n = ep_->poll(c, 200);
    if (!n) {
      spdlog::warn("rdma: completion queue of {} failed: {}", peer_.describe(), n.error().describe());
      break;
    }
    if (*n > 0) ticket_->touch();
    for (std::size_t i = 0; i < *n; ++i) {
      auto* ctx = reinterpret_cast<Ctx*>(c[i].context);
      if (!ctx) continue;
      if (c[i].error) {
        // Flushed work on a dying connection, or a peer that broke the rules.
        if (!closing_) NFSRDMA_LOG_LIMITED(info, "rdma: operation for {} failed: {}", peer_.describe(), std::strerror(c[i].error));
        closing_ = true;
        if (ctx->kind == CtxKind::send) on_send_done(static_cast<SlotCtx&>(*ctx));
        continue;
      }
      switch (ctx->kind) {
        case CtxKind::recv: on_recv(static_cast<SlotCtx&>(*ctx), c[i].len); break;
        case CtxKind::send: on_send_done(static_cast<SlotCtx&>(*ctx)); break;
        case CtxKind::rma: {
          auto& r = static_cast<Request&>(*ctx);
          if (r.rma_left.fetch_sub(1) == 1) {
            r.rma_since_ns = 0;
            on_rma_done(r);
          }
          break;
        }
      }
    }
    if (*n == 0 && ep_->peer_gone()) break;
    check_rma_deadline();
  }
  closing_ = true;
  ep_->shutdown();
  drain();
  spdlog::debug("rdma: {} disconnected", peer_.describe());
  finished_ = true;
}

Request* ServerConnection::take_request() {
  std::lock_guard lk(mu_);
  if (free_requests_.empty()) return nullptr;
  Request* r = &requests_[free_requests_.back()];
  free_requests_.pop_back();
  metrics_.in_use.add(1);
  return r;
}

bool ServerConnection::adopt(Request& r, std::size_t slot) {
  {
    std::lock_guard lk(mu_);
    if (!drained_) {
      r.payload_slot = slot;
      return true;
    }
  }
  give_slot(slot);  // ORDER: outside mu_, which give_slot takes
  return false;
}

void ServerConnection::give_slot(std::size_t slot) {
  std::function<void(std::size_t)> next;
  {
    std::lock_guard lk(mu_);
    --leases_;
    if (!parked_.empty() && !drained_) {
      next = std::move(parked_.front());
      parked_.pop_front();
      ++leases_;
    }
  }
  // ORDER: give outside mu_: give() may run a waiter of this connection.
  payload_->give(slot);
  if (next) payload_->lease(std::move(next));
}

std::span<std::uint8_t> ServerConnection::payload(const Request& r) {
  return r.own_payload ? own_payloads_->slot(r.index) : payload_->slots().slot(*r.payload_slot);
}

void* ServerConnection::payload_desc(const Request& r) {
  return r.own_payload ? own_payloads_->region().desc() : payload_->slots().region().desc();
}

void ServerConnection::give_back(Request& r) {
  r.own_payload = false;
  std::optional<std::size_t> slot;
  {
    std::lock_guard lk(mu_);
    slot = r.payload_slot;
    r.payload_slot.reset();
  }
  if (slot) give_slot(*slot);
}

void ServerConnection::drain() {
  std::vector<std::size_t> slots;
  {
    std::lock_guard lk(mu_);
    drained_ = true;
    // A buffer a handler may still be reading or writing goes back when it
    // replies (reply() on a closing connection), not now: another connection
    // could lease it meanwhile.
    for (auto& r : requests_) {
      if (!r.payload_slot || r.in_handler) continue;
      slots.push_back(*r.payload_slot);
      r.payload_slot.reset();
    }
  }
  for (auto s : slots) give_slot(s);
  std::deque<std::function<void(std::size_t)>> parked;
  {
    std::lock_guard lk(mu_);
    parked.swap(parked_);  // they hold the connection; a dying one runs none of them
  }
}

void ServerConnection::handler_done(Request& r) {
  std::lock_guard lk(mu_);
  r.in_handler = false;
}

void ServerConnection::release(Request& r) {
  give_back(r);
  r.rma_since_ns = 0;
  r.chained = false;
  r.phase = Phase::idle;
  r.body.clear();
  std::lock_guard lk(mu_);
  free_requests_.push_back(r.index);
  metrics_.in_use.add(-1);
}

void ServerConnection::repost_recv(std::size_t slot) {
  if (closing_) return;
  auto buf = recv_pool_->slot(slot);
  if (auto r = ep_->post_recv(&recv_ctx_[slot].op, buf.data(), buf.size(), recv_pool_->region().desc()); !r) {
    spdlog::warn("rdma: cannot repost a receive for {}: {}", peer_.describe(), r.error().describe());
    closing_ = true;
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
                           ? rpcrdma::validate_call(d.header, {lim.payload_bytes, lim.payload_bytes, lim.inline_bytes})
                           : Result<void>(Error{ErrorDomain::rpc, 0, Action::fail, "unparseable transport header"});
  if (!valid) {
    NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: {}", peer_.describe(), d.header.xid, valid.error().message);
    send_error(d.header.xid, rpcrdma::ERR_CHUNK);
    return repost_recv(ctx.slot);
  }
  Request* r = take_request();
  if (!r) {
    NFSRDMA_LOG_LIMITED(warn, "rdma: {} has more calls in flight than the {} credits granted (and {} more); closing",
                 peer_.describe(), lim.credits, kRequestSlack);
    closing_ = true;
    return;
  }
  r->hdr = d.header;
  r->recv_slot = ctx.slot;
  r->recv_len = len;
  r->header_bytes = d.header_bytes;
  if (r->hdr.read_list.empty()) {
    r->message.assign(bytes.begin() + static_cast<long>(d.header_bytes), bytes.end());
    repost_recv(ctx.slot);
    if (r->hdr.write_list.empty()) return dispatch(*r);
    // A Write chunk is offered: lend a payload buffer first, so READ data is
    // read straight into registered memory (rpc::ReplyMessage::area).
    r->phase = Phase::executing;
    return with_payload(*r, r->hdr.write_list[0].length(), [this, r] { dispatch(*r); });
  }
  r->phase = Phase::pulling;
  with_payload(*r, rpcrdma::read_chunk_length(r->hdr.read_list, r->hdr.read_list[0].position),
               [this, r] { start_pull(*r); });
}

void ServerConnection::start_pull(Request& r) {
  const auto& first = r.hdr.read_list[0];
  std::uint64_t len = rpcrdma::read_chunk_length(r.hdr.read_list, first.position);
  auto buf = payload(r);
  if (len > buf.size()) return fail(r, "Read chunk larger than a payload buffer");
  rpcrdma::Segment segs[rpcrdma::kMaxReadSegments];
  std::size_t n = 0;
  for (const auto& rs : r.hdr.read_list) segs[n++] = rs.target;
  std::span<const rpcrdma::Segment> chunk(segs, n);
  r.rma_left = count_chunk_ops(len, chunk, ep_->max_rma_bytes());
  r.rma_since_ns = steady_ns();
  auto posted = post_chunk_rma(*ep_, &r.op, false, buf.data(), len, payload_desc(r), chunk);
  if (!posted) return fail(r, "cannot post RDMA Read");
}

void ServerConnection::fail(Request& r, const char* why) {
  NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: {}", peer_.describe(), r.hdr.xid, why);
  if (r.phase == Phase::pulling) repost_recv(r.recv_slot);
  send_error(r.hdr.xid, rpcrdma::ERR_CHUNK);
  release(r);
}

void ServerConnection::on_rma_done(Request& r) {
  switch (r.phase) {
    case Phase::pulling: {
      // Rebuild the call: the inline part with the chunk's data at its position
      // (RFC 8166 §3.4.5), the round-up restored; position zero is the whole call.
      auto inline_part = recv_pool_->slot(r.recv_slot).subspan(r.header_bytes, r.recv_len - r.header_bytes);
      const std::uint32_t pos = r.hdr.read_list[0].position;
      std::uint64_t len = rpcrdma::read_chunk_length(r.hdr.read_list, pos);
      auto data = payload(r).first(len);
      if (r.hdr.proc == rpcrdma::RDMA_NOMSG) {
        r.message.assign(data.begin(), data.end());
        repost_recv(r.recv_slot);
        give_back(r);
        return dispatch(r);
      }
      if (pos > inline_part.size()) return fail(r, "Read chunk position beyond the inline message");
      // The data stays where the RDMA Read put it; the call keeps the buffer.
      r.message.assign(inline_part.begin(), inline_part.end());
      repost_recv(r.recv_slot);
      return dispatch(r, pos, data);
    }
    case Phase::pushing_data:
      return finish_reply(r);
    case Phase::pushing_reply:
      return send_reply(r, rpcrdma::RDMA_NOMSG);
    default:
      NFSRDMA_CHECK(false);
  }
}

void ServerConnection::dispatch(Request& r, std::optional<std::uint32_t> placed_at, std::span<const std::uint8_t> placed) {
  r.phase = Phase::executing;
  {
    std::lock_guard lk(mu_);
    r.in_handler = true;
  }
  rpc::IncomingCall call;
  call.message = r.message;
  call.placed_at = placed_at;
  call.placed = placed;
  call.reply_buffer = std::move(r.body);
  call.channel = std::shared_ptr<rpc::ReplyChannel>(shared_from_this(), &r.channel);
  call.listener = 1;  // NFS: MOUNT and PORTMAP stay on TCP (RFC 8267 §2)
  call.secure = true;
  if (has_payload(r) && !r.hdr.write_list.empty() && !placed_at) {
    auto slot = payload(r);
    call.reply_area = slot.first(std::min<std::uint64_t>(slot.size(), r.hdr.write_list[0].length()));
  }
  server_.handler_(std::move(call));
}

void ServerConnection::reply(std::size_t index, rpc::ReplyMessage&& msg) {
  Request& r = requests_[index];
  handler_done(r);
  if (closing_) return release(r);
  r.write_len = 0;
  r.reply_len = 0;
  const bool has_write_chunk = !r.hdr.write_list.empty();
  if (msg.payload_in_area && msg.payload_length > 0 && has_payload(r)) {
    // The data is already in our registered buffer: RDMA Write it from there.
    r.write_len = static_cast<std::uint32_t>(msg.payload_length);
    r.phase = Phase::pushing_data;
    r.body = std::move(msg.bytes);
    std::span<const rpcrdma::Segment> segs(r.hdr.write_list[0].segments.begin(), r.hdr.write_list[0].segments.size());
    return push(r, r.write_len, segs);
  }
  give_back(r);  // a lent buffer the reply did not use, or the Read chunk's data
  if (has_write_chunk && msg.payload_length > 0) {
    const auto& chunk = r.hdr.write_list[0];
    if (msg.payload_length > chunk.length()) {
      NFSRDMA_LOG_LIMITED(info, "rdma: reply data of {} bytes does not fit the Write chunk of {}", msg.payload_length,
                   chunk.length());
      send_error(r.hdr.xid, rpcrdma::ERR_CHUNK);
      return release(r);
    }
    r.write_len = static_cast<std::uint32_t>(msg.payload_length);
    r.phase = Phase::pushing_data;
    auto whole = std::make_shared<rpc::ReplyMessage>(std::move(msg));
    with_payload(r, r.write_len, [this, &r, whole] {
      std::memcpy(payload(r).data(), whole->bytes.data() + whole->payload_offset, whole->payload_length);
      r.body = without_payload(*whole);
      std::span<const rpcrdma::Segment> segs(r.hdr.write_list[0].segments.begin(),
                                             r.hdr.write_list[0].segments.size());
      push(r, r.write_len, segs);
    });
    return;
  }
  // No data to place (or no Write chunk offered): the reply travels whole.
  r.body = std::move(msg.bytes);
  finish_reply(r);
}

// Chaining needs the provider's ordering, and a reply that then goes inline:
// one that needs the Reply chunk too would want a second payload buffer while
// the Write chunk's is still held. It pays where a Write completes only once
// the peer acknowledged it (verbs RC: a round trip the Send no longer waits
// for); the tcp provider completes a Write locally, so waiting costs no round
// trip there, and chaining measured 0.88x at 1 MiB reads: it waits.
bool ServerConnection::chain(const Request& r) const {
  return chain_writes_ && (r.phase == Phase::pushing_reply || fits_inline(r));
}

bool ServerConnection::fits_inline(const Request& r) const {
  // Our header is at most this long: fixed words plus the echoed Write chunk.
  const std::size_t header_max = rpcrdma::kMinHeaderBytes + 8 + r.hdr.write_list.size() * (8 + 16 * rpcrdma::kMaxChunkSegments);
  return header_max + r.body.size() <= peer_recv_inline_;
}

void ServerConnection::push(Request& r, std::uint32_t len, std::span<const rpcrdma::Segment> segs) {
  r.chained = chain(r);
  r.rma_left = r.chained ? 0 : count_chunk_ops(len, segs, ep_->max_rma_bytes());
  // Chained, this stays set until the Send completes: a Write the peer never
  // takes holds the Send behind it, and check_rma_deadline() sees it.
  r.rma_since_ns = steady_ns();
  if (!post_chunk_rma(*ep_, &r.op, true, payload(r).data(), len, payload_desc(r), segs, !r.chained)) {
    return fail(r, "cannot post RDMA Write");
  }
  if (r.chained) on_rma_done(r);
}

void ServerConnection::finish_reply(Request& r) {
  if (!r.chained) give_back(r);
  if (fits_inline(r)) return send_reply(r, rpcrdma::RDMA_MSG);
  if (!r.hdr.reply_chunk || r.body.size() > r.hdr.reply_chunk->length()) {
    NFSRDMA_LOG_LIMITED(info, "rdma: ERR_CHUNK to {} for xid {:#x}: a {}-byte reply needs a {}", peer_.describe(), r.hdr.xid,
                 r.body.size(), r.hdr.reply_chunk ? "larger Reply chunk" : "Reply chunk");
    send_error(r.hdr.xid, rpcrdma::ERR_CHUNK);
    return release(r);
  }
  r.phase = Phase::pushing_reply;
  r.reply_len = static_cast<std::uint32_t>(r.body.size());
  with_payload(r, r.body.size(), [this, &r] {
    auto buf = payload(r);
    if (r.body.size() > buf.size()) return fail(r, "reply larger than a payload buffer");
    std::memcpy(buf.data(), r.body.data(), r.body.size());
    std::span<const rpcrdma::Segment> segs(r.hdr.reply_chunk->segments.begin(), r.hdr.reply_chunk->segments.size());
    push(r, r.reply_len, segs);
  });
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

void ServerConnection::send_reply(Request& r, rpcrdma::Proc proc) {
  if (!r.chained) give_back(r);
  Header h;
  h.xid = r.hdr.xid;
  h.credits = server_.options_.credits;
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
  post_send_slot(*slot, head.size() + body, r.index);
}

void ServerConnection::on_send_done(SlotCtx& ctx) {
  const std::size_t request = std::exchange(ctx.request, kNoRequest);
  send_pool_->give(ctx.slot);
  if (request != kNoRequest) release(requests_[request]);
}

void ServerConnection::send_error(std::uint32_t xid, rpcrdma::ErrorCode code) {
  auto slot = take_send_slot(true);
  if (!slot) return;  // out of buffers for errors: the client times out instead
  Header h;
  h.xid = xid;
  h.credits = server_.options_.credits;
  h.proc = rpcrdma::RDMA_ERROR;
  h.error = code;
  std::vector<std::uint8_t> head;
  xdr::Encoder e(head);
  rpcrdma::encode_header(e, h);
  std::memcpy(send_pool_->slot(*slot).data(), head.data(), head.size());
  post_send_slot(*slot, head.size());
}

std::optional<std::size_t> ServerConnection::take_send_slot(bool for_error) {
  // Error replies may not use the last requests_.size() buffers: those are
  // the requests' own, so a reply never waits for one.
  if (for_error && send_pool_->available() <= requests_.size()) return std::nullopt;
  return send_pool_->take();
}

void ServerConnection::post_send_slot(std::size_t slot, std::size_t len, std::size_t request) {
  auto buf = send_pool_->slot(slot);
  send_ctx_[slot].request = request;
  if (auto r = ep_->post_send(&send_ctx_[slot].op, buf.data(), len, send_pool_->region().desc()); !r) {
    spdlog::info("rdma: send to {} failed: {}", peer_.describe(), r.error().describe());
    closing_ = true;
    on_send_done(send_ctx_[slot]);
  }
}

}  // namespace nfsrdma::rdma
