#include "lib/transport/rdma/server_connection.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma::rdma {

using rpcrdma::Header;

thread_local const ServerConnection* ServerConnection::running_here_ = nullptr;

void RequestChannel::send(rpc::ReplyMessage&& reply) { conn->reply(*request, std::move(reply)); }
void RequestChannel::drop() { conn->drop(*request); }
void RequestChannel::close() { conn->close(); }
const rpc::Peer& RequestChannel::peer() const { return conn->peer(); }

ConnectionMetrics& connection_metrics() {
  static ConnectionMetrics m{
      metrics::registry().gauge("nfsrdma_server_connections", "Connections open, by transport", {{"transport", "rdma"}}),
      metrics::registry().gauge("nfsrdma_server_rdma_credits_granted", "Credits granted, summed over connections"),
      metrics::registry().gauge("nfsrdma_server_rdma_credits_in_use", "Calls in progress, summed over connections")};
  return m;
}

ServerConnection::~ServerConnection() {
  // Requests a dying connection never finished are freed with it.
  metrics_.in_use.add(-static_cast<std::int64_t>(requests_.size() - free_requests_.size()));
  metrics_.connections.add(-1);
  metrics_.granted.add(-static_cast<std::int64_t>(granted_));
  server_.budget_->release(rpc::MemoryBudget::rdma_connections, addr_, charged_);
}

std::size_t ServerConnection::bytes_for(std::uint32_t credits) const {
  const auto& o = server_.options_;
  const std::size_t requests = credits + std::min<std::size_t>(kRequestSlack, credits);
  const std::size_t sends = requests + std::min<std::size_t>(kErrorSends, credits);
  // Receive and send buffers, each request's payload buffer and its call,
  // reply and header buffers (Request::message, body, head).
  return (credits + sends) * o.inline_bytes + requests * (o.small_payload_bytes + 2 * o.inline_bytes + 1024);
}

void ServerConnection::add_requests(std::size_t upto) {
  const std::size_t from = requests_.size();
  for (std::size_t i = from; i < upto; ++i) {
    Request& r = requests_.emplace_back();
    r.kind = CtxKind::rma;
    r.index = i;
    r.channel.conn = this;
    r.channel.request = &r;
  }
  std::lock_guard lk(mu_);
  // The new ones last out: free_requests_ is taken from the back, where the
  // requests already used (their buffers made) wait.
  for (std::size_t i = upto; i > from; --i) free_requests_.insert(free_requests_.begin(), i - 1);
}

bool ServerConnection::admit_memory() {
  const std::size_t bytes = bytes_for(std::min(kInitialCredits, server_.options_.credits));
  if (!server_.budget_->try_charge(rpc::MemoryBudget::rdma_connections, addr_, bytes)) return false;
  charged_ = bytes;
  return true;
}

Result<void> ServerConnection::setup(const fabric::ConnectRequest& req) {
  const auto& o = server_.options_;
  granted_ = std::min(kInitialCredits, o.credits);
  metrics_.granted.add(granted_);  // ~ServerConnection takes granted_ back, set up or not
  peer_recv_inline_ = rpcrdma::peer_receive_inline(rpcrdma::decode_private(req.private_data), o.inline_bytes);
  auto dev = server_.device_for(req);
  if (!dev) return dev.error();
  fabric::Domain& domain = *dev->first;
  domain_ = &domain;
  payload_ = dev->second;
  // Room for every credit, registered as far as granted: grow() registers more.
  auto rp = SlotPool::create(domain, o.credits, o.inline_bytes, false, granted_);
  if (!rp) return rp.error();
  recv_pool_ = std::move(*rp);
  // A send buffer for every request's reply, plus some for error replies.
  auto sp = SlotPool::create(domain, max_requests_ + kErrorSends, o.inline_bytes, false,
                             usable_requests() + error_sends());
  if (!sp) return sp.error();
  send_pool_ = std::move(*sp);
  auto op = SlotPool::create(domain, max_requests_, o.small_payload_bytes, true, usable_requests());
  if (!op) return op.error();
  own_payloads_ = std::move(*op);
  recv_ctx_.resize(o.credits);
  send_ctx_.resize(send_pool_->count());
  for (std::size_t i = 0; i < recv_ctx_.size(); ++i) recv_ctx_[i] = {{{}, CtxKind::recv}, i};
  for (std::size_t i = 0; i < send_ctx_.size(); ++i) send_ctx_[i] = {{{}, CtxKind::send}, i, kNoRequest};
  add_requests(usable_requests());
  rpcrdma::ConnectPrivate mine;
  mine.send_size = o.inline_bytes;
  mine.recv_size = o.inline_bytes;
  auto priv = rpcrdma::encode_private(mine);
  // Queues as deep as the connection can use, not the listener's 1024 each
  // way: providers size their buffers by them (the tcp provider allocates
  // about 1 KiB per completion queue entry, 2.1 MiB per connection with
  // 1024 each way). Receives: one per credit. Sends: one per request and
  // error reply, and some room for RMAs (a full queue is a wait); at most
  // --rdma-send-queue, or the provider's when smaller.
  fabric::ConnectRequest& asked = const_cast<fabric::ConnectRequest&>(req);
  std::size_t tx = max_requests_ + kErrorSends + 32;
  if (o.send_queue_depth) tx = std::min<std::size_t>(tx, o.send_queue_depth);
  asked.info->tx_attr->size = std::min<std::size_t>(asked.info->tx_attr->size, tx);
  asked.info->rx_attr->size = std::min<std::size_t>(asked.info->rx_attr->size, o.credits);
  auto ep = fabric::Endpoint::accept(domain, req.info.get(), priv, 5000, 0,
                                     [&](fabric::Endpoint& e) -> Result<void> {
                                       for (std::size_t i = 0; i < granted_; ++i) {
                                         auto buf = recv_pool_->slot(i);
                                         if (auto r = e.post_recv(&recv_ctx_[i].op, buf.data(), buf.size(),
                                                                  recv_pool_->desc(i));
                                             !r) {
                                           return r;
                                         }
                                       }
                                       return {};
                                     });
  if (!ep) return ep.error();
  ep_ = std::move(*ep);
  // The connection request may not tell the peer's address (verbs does not):
  // the endpoint does. What was charged moves to that address's share.
  rpc::Peer connected;
  if (ep_->peer_address(connected.addr, connected.len)) {
    const rpc::Address addr = rpc::to_v6(connected.addr);
    if (addr != addr_) {
      server_.budget_->release(rpc::MemoryBudget::rdma_connections, addr_, charged_);
      server_.budget_->charge(rpc::MemoryBudget::rdma_connections, addr, charged_);
      addr_ = addr;
    }
    peer_ = connected;
  }
  sq_free_ = ep_->send_queue_size();
  if (o.send_queue_depth) sq_free_ = std::min<std::size_t>(sq_free_, o.send_queue_depth);
  chain_writes_ = ep_->orders_send_after_write() && server_.provider_ != "tcp";
  return {};
}

// While a quarter of the credits granted are in use, twice as many (up to
// --credits): receives posted first, then the grant the next reply carries
// (RFC 8166 §3.3.1: never more credits than receives posted). Credits never
// shrink; an idle connection is closed after --idle-timeout anyway. Each
// step is charged to the memory budget first: at the budget, the grant stays.
void ServerConnection::maybe_grow() {
  const auto& o = server_.options_;
  if (granted_ >= o.credits) return;
  std::size_t in_use;
  {
    std::lock_guard lk(mu_);
    in_use = usable_requests() - free_requests_.size();
  }
  if (in_use * 4 < granted_) return;
  const std::uint32_t next = std::min(o.credits, granted_ * 2);
  const std::size_t more = bytes_for(next) - bytes_for(granted_);
  if (!server_.budget_->try_charge(rpc::MemoryBudget::rdma_connections, addr_, more)) {
    NFSRDMA_LOG_LIMITED(info, "rdma: {} stays at {} credits: the memory budget is spent", peer_.describe(), granted_);
    return;
  }
  charged_ += more;
  const std::size_t usable = usable_requests(), sends = usable + error_sends();
  const std::uint32_t before = granted_;
  Result<void> grown = recv_pool_->grow(*domain_, next - granted_);
  if (grown) grown = own_payloads_->grow(*domain_, next + std::min<std::size_t>(kRequestSlack, next) - usable);
  if (grown) {
    grown = send_pool_->grow(*domain_, next + std::min<std::size_t>(kRequestSlack, next) +
                                           std::min<std::size_t>(kErrorSends, next) - sends);
  }
  if (!grown) {
    NFSRDMA_LOG_LIMITED(warn, "rdma: cannot register more buffers for {}: {}", peer_.describe(),
                        grown.error().describe());
    return;  // what was registered stays unused until the connection ends
  }
  granted_ = next;
  for (std::size_t i = before; i < granted_; ++i) repost_recv(i);
  add_requests(usable_requests());
  metrics_.granted.add(granted_ - before);
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
  if (*n > 0) {
    ticket_->touch();
    sq_stalled_ = false;  // a completion: the provider's send queue has room again
  }
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
  if (!sq_waiting_.empty()) resume_sq_waiters();
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

void ServerConnection::reply(Request& r, rpc::ReplyMessage&& msg) {
  r.reply = std::move(msg);
  r.dropped = false;
  // Run inline, the handler returns into advance(), which goes on from here.
  if (running_here_ == this) {
    to(r, State::replied);
    return;
  }
  post(r);
}

void ServerConnection::drop(Request& r) {
  r.dropped = true;
  if (running_here_ == this) {
    to(r, State::replied);
    return;
  }
  post(r);
}

void ServerConnection::post(Request& r) {
  Request* head = inbox_.load(std::memory_order_relaxed);
  do {
    r.next_in_inbox = head;
  } while (!inbox_.compare_exchange_weak(head, &r, std::memory_order_seq_cst, std::memory_order_relaxed));
  // ORDER: pushed, then exited_ read; the event loop sets exited_, then
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
    if (q.state == State::executing) to(q, State::replied);
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
  Request* r;
  {
    std::lock_guard lk(mu_);
    if (free_requests_.empty()) return nullptr;
    r = &requests_[free_requests_.back()];
    free_requests_.pop_back();
  }
  metrics_.in_use.add(1);
  // Its buffers keep this room from call to call (release() frees more).
  const auto& o = server_.options_;
  r->message.reserve(o.inline_bytes);
  r->body.reserve(o.inline_bytes);
  r->head.reserve(rpcrdma::kMinHeaderBytes + 8 + rpcrdma::kMaxChunkSegments * 16);
  return r;
}

State ServerConnection::release(Request& r) {
  give_back(r);
  r.rma_since_ns = 0;
  r.rma_left = 0;
  r.chained = false;
  r.sq_held = 0;
  r.sq_queued = false;
  r.rma_posted = 0;
  r.holds_recv = false;
  r.placed_at.reset();
  to(r, State::free);
  // Room past the inline size (a NOMSG call rebuilt, a reply built for a
  // Reply chunk: up to megabytes) is not kept: the budget counts the inline
  // room per request, and take_request() makes that again.
  const std::size_t keep = server_.options_.inline_bytes;
  for (auto* v : {&r.message, &r.body, &r.reply.bytes}) {
    if (v->capacity() > keep) {
      *v = std::vector<std::uint8_t>();
    } else {
      v->clear();
    }
  }
  std::lock_guard lk(mu_);
  free_requests_.push_back(r.index);
  metrics_.in_use.add(-1);
  return State::free;
}

bool ServerConnection::buffer(Request& r, std::size_t bytes) {
  if (has_payload(r)) return true;
  if (r.leasing) return false;
  if (bytes <= own_payloads_->slot_bytes()) {
    r.own_payload = true;
    return true;
  }
  if (auto slot = payload_->try_take(payload_account_)) {
    r.payload_slot = *slot;
    return true;
  }
  // The buffer comes through the inbox, on whichever thread gives one back.
  r.leasing = true;
  payload_->lease(payload_account_, [self = shared_from_this(), &r](std::size_t slot) {
    r.payload_slot = slot;
    self->post(r);
  });
  return false;
}

std::span<std::uint8_t> ServerConnection::payload(const Request& r) {
  return r.own_payload ? own_payloads_->slot(r.index) : payload_->slots().slot(*r.payload_slot);
}

void* ServerConnection::payload_desc(const Request& r) {
  return r.own_payload ? own_payloads_->desc(r.index) : payload_->slots().desc(*r.payload_slot);
}

void ServerConnection::give_back(Request& r) {
  r.own_payload = false;
  if (auto slot = std::exchange(r.payload_slot, std::nullopt)) payload_->give(payload_account_, *slot);
}

// The event loop's last act for the connection. A request the handler has, or one whose
// buffer a give() already handed it, ends when it comes back (post, then
// settle); one whose lease still waited is dropped with the lease and goes
// with the connection, holding nothing shared.
void ServerConnection::drain() {
  payload_->close(payload_account_);  // its loop holds this connection meanwhile
  sq_waiting_.clear();
  for (auto& r : requests_) {
    if (r.state != State::executing && !r.leasing) give_back(r);
  }
  exited_ = true;
  settle();
}

void ServerConnection::repost_recv(std::size_t slot) {
  if (closing_) return;
  auto buf = recv_pool_->slot(slot);
  if (auto r = ep_->post_recv(&recv_ctx_[slot].op, buf.data(), buf.size(), recv_pool_->desc(slot)); !r) {
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
  ++sq_free_;
  if (request == kNoRequest) return;
  Request& r = requests_[request];
  sq_free_ += std::exchange(r.sq_held, 0);  // its unsignalled Writes, done before it
  release(r);
}

// Best effort, as RFC 8166 §5.3.2 allows no more: without a spare send buffer
// or room in the send queue, no error goes, and the client times out.
void ServerConnection::send_error(std::uint32_t xid, rpcrdma::ErrorCode code) {
  if (sq_stalled_ || sq_free_ == 0 || !sq_waiting_.empty()) return;
  auto slot = take_send_slot(true);
  if (!slot) return;
  Header h;
  h.xid = xid;
  h.credits = granted_;
  h.proc = rpcrdma::RDMA_ERROR;
  h.error = code;
  std::vector<std::uint8_t> head;
  xdr::Encoder e(head);
  rpcrdma::encode_header(e, h);
  auto buf = send_pool_->slot(*slot);
  std::memcpy(buf.data(), head.data(), head.size());
  send_ctx_[*slot].request = kNoRequest;
  if (auto r = ep_->post_send(&send_ctx_[*slot].op, buf.data(), head.size(), send_pool_->desc(*slot)); !r) {
    send_pool_->give(*slot);
    if (r.error().action == Action::retry_now) {
      sq_stalled_ = true;
      return;
    }
    spdlog::info("rdma: send to {} failed: {}", peer_.describe(), r.error().describe());
    closing_ = true;
    return;
  }
  --sq_free_;
}

std::optional<std::size_t> ServerConnection::take_send_slot(bool for_error) {
  // Error replies may not use the last usable_requests() buffers: those are
  // the requests' own, so a reply never waits for one.
  if (for_error && send_pool_->available() <= usable_requests()) return std::nullopt;
  return send_pool_->take();
}

bool ServerConnection::sq_wait(Request& r) {
  if (!r.sq_queued) {
    r.sq_queued = true;
    sq_waiting_.push_back(r.index);
    static auto& waits = metrics::registry().counter(
        "nfsrdma_server_rdma_send_queue_waits_total", "Requests that waited for room in a connection's send queue");
    waits.inc();
  }
  return false;
}

void ServerConnection::resume_sq_waiters() {
  while (!sq_waiting_.empty() && !sq_stalled_ && sq_free_ > 0 && !closing_) {
    Request& r = requests_[sq_waiting_.front()];
    sq_waiting_.pop_front();
    r.sq_queued = false;
    resuming_ = &r;
    advance(r);
    resuming_ = nullptr;
    if (r.sq_queued) {
      // Still short: first in line again.
      sq_waiting_.pop_back();
      sq_waiting_.push_front(r.index);
      return;
    }
  }
}

bool ServerConnection::post_reply(Request& r) {
  if (!sq_open(r)) return sq_wait(r);
  auto buf = send_pool_->slot(r.send_slot);
  send_ctx_[r.send_slot].request = r.index;
  auto posted = ep_->post_send(&send_ctx_[r.send_slot].op, buf.data(), r.send_len, send_pool_->desc(r.send_slot));
  if (!posted) {
    if (posted.error().action == Action::retry_now) {
      sq_stalled_ = true;
      return sq_wait(r);
    }
    spdlog::info("rdma: send to {} failed: {}", peer_.describe(), posted.error().describe());
    closing_ = true;
    send_ctx_[r.send_slot].request = kNoRequest;
    send_pool_->give(r.send_slot);
    release(r);
    return false;
  }
  --sq_free_;
  return true;
}

bool ServerConnection::post_rma(Request& r) {
  if (!sq_open(r)) return sq_wait(r);
  auto reached = post_chunk_rma(*ep_, &r.op, r.rma_write, payload(r).data(), r.rma_len, payload_desc(r), r.rma_segs,
                                !r.chained, r.rma_posted, sq_free_);
  if (!reached) {
    broken(r, r.rma_write ? "cannot post RDMA Write" : "cannot post RDMA Read");
    return false;
  }
  const std::size_t now = *reached - r.rma_posted;
  sq_free_ -= now;
  if (r.chained) r.sq_held += now;
  r.rma_posted = *reached;
  if (r.rma_posted == r.rma_ops) return true;
  if (sq_free_ > 0) sq_stalled_ = true;  // the provider's queue filled before ours
  return sq_wait(r);
}

}  // namespace nfsrdma::rdma
