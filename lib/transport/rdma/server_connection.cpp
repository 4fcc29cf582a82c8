#include "lib/transport/rdma/server_connection.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma::rdma {

using rpcrdma::Header;

thread_local const ServerConnection* ServerConnection::running_here_ = nullptr;

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
  const std::int64_t limit = std::chrono::nanoseconds(server_.options_.rma_timeout).count();
  for (const auto& r : requests_) {
    if (r.rma_since_ns != 0 && now - r.rma_since_ns > limit && !closing_) {
      NFSRDMA_LOG_LIMITED(warn, "rdma: RDMA {} for xid {:#x} from {} not done after {} ms; closing the connection",
                          r.state == State::pulling ? "Read" : "Write", r.hdr.xid, peer_.describe(),
                          std::chrono::duration_cast<std::chrono::milliseconds>(server_.options_.rma_timeout).count());
      closing_ = true;
    }
  }
}

bool ServerConnection::turn(bool timers_due) {
  running_here_ = this;
  fabric::Completion c[32];
  auto n = ep_->poll(c, 0);
  if (!n) {
    spdlog::warn("rdma: completion queue of {} failed: {}", peer_.describe(), n.error().describe());
    closing_ = true;
    running_here_ = nullptr;
    return false;
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
      case CtxKind::rma: on_rma_done(static_cast<Request&>(*ctx)); break;
    }
  }
  const bool active = take_inbox() || *n > 0;
  if (timers_due) {
    // Not asked while busy: librdmacm allocates on every rdma_get_cm_event.
    if (!active && ep_->peer_gone()) closing_ = true;
    check_rma_deadline();
  }
  running_here_ = nullptr;
  return active;
}

void ServerConnection::finish() {
  running_here_ = this;
  closing_ = true;
  ep_->shutdown();
  drain();
  running_here_ = nullptr;
  spdlog::debug("rdma: {} disconnected", peer_.describe());
  finished_ = true;
}

void ServerConnection::reply(std::size_t index, rpc::ReplyMessage&& msg) {
  Request& r = requests_[index];
  r.reply = std::move(msg);
  r.dropped = false;
  // Run inline, the handler returns into advance(), which goes on from here.
  if (running_here_ == this) {
    r.state = State::replied;
    return;
  }
  post(r);
}

void ServerConnection::drop(std::size_t index) {
  Request& r = requests_[index];
  r.dropped = true;
  if (running_here_ == this) {
    r.state = State::replied;
    return;
  }
  post(r);
}

void ServerConnection::post(Request& r) {
  Request* head = inbox_.load(std::memory_order_relaxed);
  do {
    r.next_in_inbox = head;
  } while (!inbox_.compare_exchange_weak(head, &r, std::memory_order_seq_cst, std::memory_order_relaxed));
  // ORDER: pushed, then exited_ read; the progress thread sets exited_, then
  // empties the inbox (settle): one of the two finds the request.
  if (exited_.load()) return settle();
  // Only a loop about to sleep needs waking (wake() looks); onto a
  // non-empty inbox, whoever pushed first saw to that.
  if (!head && running_here_ != this) loop_->wake();
}

bool ServerConnection::take_inbox() {
  if (!inbox_.load(std::memory_order_relaxed)) return false;
  Request* r = inbox_.exchange(nullptr, std::memory_order_acquire);
  // The stack holds them newest first: reverse, so they go on in arrival order.
  Request* in_order = nullptr;
  while (r) {
    Request* next = r->next_in_inbox;
    r->next_in_inbox = in_order;
    in_order = r;
    r = next;
  }
  while (in_order) {
    Request& q = *in_order;
    in_order = q.next_in_inbox;
    q.next_in_inbox = nullptr;
    q.leasing = false;
    if (q.state == State::executing) q.state = State::replied;
    advance(q);
  }
  return true;
}

void ServerConnection::settle() {
  Request* r = inbox_.exchange(nullptr);
  while (r) {
    Request* next = r->next_in_inbox;
    r->next_in_inbox = nullptr;
    release(*r);
    r = next;
  }
}

Request* ServerConnection::take_request() {
  std::lock_guard lk(mu_);
  if (free_requests_.empty()) return nullptr;
  Request* r = &requests_[free_requests_.back()];
  free_requests_.pop_back();
  metrics_.in_use.add(1);
  return r;
}

void ServerConnection::release(Request& r) {
  give_back(r);
  r.rma_since_ns = 0;
  r.rma_left = 0;
  r.chained = false;
  r.holds_recv = false;
  r.placed_at.reset();
  r.state = State::free;
  r.body.clear();
  r.reply.bytes.clear();
  std::lock_guard lk(mu_);
  free_requests_.push_back(r.index);
  metrics_.in_use.add(-1);
}

bool ServerConnection::buffer(Request& r, std::size_t bytes) {
  if (has_payload(r)) return true;
  if (r.leasing) return false;
  if (bytes <= own_payloads_->slot_bytes()) {
    r.own_payload = true;
    return true;
  }
  {
    std::lock_guard lk(mu_);
    if (leases_ >= lease_cap()) {
      r.leasing = true;
      parked_.push_back(r.index);
      return false;
    }
    ++leases_;
  }
  if (auto slot = payload_->try_take()) {
    r.payload_slot = *slot;
    return true;
  }
  r.leasing = true;
  lease(r);
  return false;
}

// The buffer comes through the inbox, on whichever thread gives one back.
void ServerConnection::lease(Request& r) {
  payload_->lease([self = shared_from_this(), &r](std::size_t slot) {
    r.payload_slot = slot;
    self->post(r);
  });
}

std::span<std::uint8_t> ServerConnection::payload(const Request& r) {
  return r.own_payload ? own_payloads_->slot(r.index) : payload_->slots().slot(*r.payload_slot);
}

void* ServerConnection::payload_desc(const Request& r) {
  return r.own_payload ? own_payloads_->region().desc() : payload_->slots().region().desc();
}

void ServerConnection::give_back(Request& r) {
  r.own_payload = false;
  if (auto slot = std::exchange(r.payload_slot, std::nullopt)) give_slot(*slot);
}

void ServerConnection::give_slot(std::size_t slot) {
  std::optional<std::size_t> next;
  {
    std::lock_guard lk(mu_);
    --leases_;
    if (!parked_.empty() && !drained_) {
      next = parked_.front();
      parked_.pop_front();
      ++leases_;
    }
  }
  // ORDER: give outside mu_: give() may run a waiter of this connection.
  payload_->give(slot);
  if (next) lease(requests_[*next]);
}

// The progress thread's last act. A request the handler has, or one whose
// buffer is on its way, ends when it comes back (post, then settle).
void ServerConnection::drain() {
  {
    std::lock_guard lk(mu_);
    drained_ = true;
    parked_.clear();
  }
  for (auto& r : requests_) {
    if (r.state != State::executing && !r.leasing) give_back(r);
  }
  exited_ = true;
  settle();
}

void ServerConnection::repost_recv(std::size_t slot) {
  if (closing_) return;
  auto buf = recv_pool_->slot(slot);
  if (auto r = ep_->post_recv(&recv_ctx_[slot].op, buf.data(), buf.size(), recv_pool_->region().desc()); !r) {
    spdlog::warn("rdma: cannot repost a receive for {}: {}", peer_.describe(), r.error().describe());
    closing_ = true;
  }
}

void ServerConnection::repost_recv(Request& r) {
  if (std::exchange(r.holds_recv, false)) repost_recv(r.recv_slot);
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
