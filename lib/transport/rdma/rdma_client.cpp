#include "lib/transport/rdma/rdma_client.hpp"

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/rpcrdma/marshal.hpp"
#include "lib/rpcrdma/private_data.hpp"

namespace nfsrdma::rdma {

namespace {
// Calls in flight under the server's credits, summed over this process's connections.
metrics::Gauge& credits_in_use() {
  static metrics::Gauge& g = metrics::registry().gauge("nfsrdma_client_rdma_credits_in_use",
                                                       "RPC-over-RDMA calls in flight, within the granted credits");
  return g;
}

// What a faulty reply means for its call, in words the user can act on.
Error reply_error(const rpcrdma::ReplyLayout& r, const rpcrdma::Header& h, const std::string& peer) {
  using enum rpcrdma::ReplyFault;
  switch (r.fault) {
    case err_vers:
      return Error{ErrorDomain::rpc, EPROTONOSUPPORT, Action::fail,
                   "rpcrdma: server " + peer + " does not speak RPC-over-RDMA version 1 (ERR_VERS " +
                       std::to_string(h.vers_low) + "-" + std::to_string(h.vers_high) + ")"};
    case err_chunk:
      return Error{ErrorDomain::rpc, EPROTO, Action::fail, "rpcrdma: server " + peer + " refused the call's chunk lists (ERR_CHUNK)"};
    case overclaim:
      return Error{ErrorDomain::rpc, EPROTO, Action::fail, "rpcrdma: server " + peer + " " + r.why};
    case unexpected:
      return Error{ErrorDomain::rpc, EPROTO, Action::reconnect, "rpcrdma: server " + peer + " " + r.why};
    case unparseable:
    case none:
      break;
  }
  return Error{ErrorDomain::rpc, EPROTO, Action::reconnect, "rpcrdma: unparseable reply header from " + peer};
}
}  // namespace

Result<std::unique_ptr<RdmaClient>> RdmaClient::connect(const std::string& host, std::uint16_t port,
                                                        RdmaClientOptions options) {
  std::unique_ptr<RdmaClient> c(new RdmaClient);
  c->options_ = options;
  c->peer_ = host + ":" + std::to_string(port);
  auto prov = fabric::choose_provider(options.provider);
  if (!prov) return prov.error();
  c->provider_ = *prov;
  auto info = fabric::get_info(c->provider_, host, std::to_string(port), false, options.source_address);
  if (!info) return info.error();
  // A domain of our own: the only memory a server can reach is this connection's buffers.
  auto domain = fabric::Domain::open(info->get());
  if (!domain) return domain.error();
  c->domain_ = std::move(*domain);
  const std::uint32_t n = options.max_credits;
  auto rp = SlotPool::create(*c->domain_, n, options.inline_bytes, false);
  if (!rp) return rp.error();
  c->recv_pool_ = std::move(*rp);
  auto sp = SlotPool::create(*c->domain_, n + kSendBatch, options.inline_bytes, false);
  if (!sp) return sp.error();
  c->send_pool_ = std::move(*sp);
  c->sends_.resize(n + kSendBatch);
  auto bp = SlotPool::create(*c->domain_, options.bounce_slots, options.bounce_bytes, true);
  if (!bp) return bp.error();
  c->bounce_ = std::move(*bp);
  c->recv_ctx_.resize(n);
  for (std::size_t i = 0; i < n; ++i) c->recv_ctx_[i] = {{}, true, i};
  c->send_ctx_.resize(n + kSendBatch);
  for (std::size_t i = 0; i < c->send_ctx_.size(); ++i) c->send_ctx_[i] = {{}, false, i};
  rpcrdma::ConnectPrivate mine;
  mine.send_size = options.inline_bytes;
  mine.recv_size = options.inline_bytes;
  auto priv = rpcrdma::encode_private(mine);
  std::vector<std::uint8_t> theirs;
  RdmaClient* self = c.get();
  auto ep = fabric::Endpoint::connect(*c->domain_, info->get(), priv, theirs, options.connect_timeout_ms, n * 2 + 64,
                                      options.caller_progress && options.wait_fd,
                                      [self](fabric::Endpoint& e) -> Result<void> {
                                        for (std::size_t i = 0; i < self->recv_ctx_.size(); ++i) {
                                          auto buf = self->recv_pool_->slot(i);
                                          if (auto r = e.post_recv(&self->recv_ctx_[i].op, buf.data(), buf.size(),
                                                                   self->recv_pool_->desc(i));
                                              !r) {
                                            return r;
                                          }
                                        }
                                        return {};
                                      });
  if (!ep) {
    Error e = ep.error();
    e.message = "cannot connect over RDMA (" + c->provider_ + ") to " + c->peer_ + ": " + e.message;
    return e;
  }
  c->ep_ = std::move(*ep);
  const auto peer = rpcrdma::decode_private(theirs);
  c->peer_recv_inline_ = rpcrdma::peer_receive_inline(peer, options.inline_bytes);
  c->peer_send_inline_ = rpcrdma::peer_send_inline(peer, options.inline_bytes);
  if (!options.caller_progress) c->progress_ = std::thread([self] { self->progress_loop(); });
  return c;
}

RdmaClient::~RdmaClient() { shutdown(); }

void RdmaClient::shutdown() {
  if (stopping_.exchange(true)) return;
  if (ep_) ep_->wake();
  if (progress_.joinable()) progress_.join();
  if (ep_) ep_->shutdown();
  fail_all(Error{ErrorDomain::rpc, ECONNABORTED, Action::fail, "rpc: transport shut down"});
}

std::uint32_t RdmaClient::credits() {
  std::lock_guard lk(mu_);
  return credits_;
}

std::uint32_t RdmaClient::max_in_flight_seen() {
  std::lock_guard lk(mu_);
  return max_in_flight_;
}

Result<void> RdmaClient::register_memory(std::span<std::uint8_t> region) {
  auto mr = domain_->register_memory(region.data(), region.size(), true);
  if (!mr) return mr.error();
  std::lock_guard lk(mu_);
  regions_.push_back(std::make_unique<CallerRegion>(CallerRegion{region, std::move(*mr)}));
  return {};
}

std::uint64_t RdmaClient::bounce_bytes() {
  std::lock_guard lk(mu_);
  return bounce_bytes_;
}

const RdmaClient::CallerRegion* RdmaClient::region_of(const void* p, std::size_t n) {
  if (n == 0) return nullptr;
  for (const auto& r : regions_) {
    if (r->mr.contains(p, n)) return r.get();
  }
  return nullptr;
}

void RdmaClient::call(const rpc::OutgoingCall& call, rpc::ReplyHandler on_reply) {
  Call c;
  c.xid = call.xid;
  c.message = call.message;
  c.reply_max = call.reply_max_bytes;
  c.reply_payload_max = call.reply_payload_max;
  std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
  {
    std::lock_guard lk(mu_);
    c.payload_registered = region_of(call.message.payload.data(), call.message.payload.size()) != nullptr;
    if (region_of(call.reply_payload.data(), call.reply_payload.size())) c.direct_reply = call.reply_payload;
    if (broken_) {
      failed.emplace_back(std::move(on_reply),
                          Error{ErrorDomain::rpc, ENOTCONN, Action::reconnect, "rpc: RDMA connection to " + peer_ + " is down"});
    } else if (!queued_.empty() || in_flight_ >= credits_ || issue_locked(c, on_reply, failed) == Issue::wait) {
      queued_.emplace_back(Job{c, std::move(on_reply)});  // its turn comes with a reply (pump_locked)
      pump_locked(failed);
    }
  }
  for (auto& [h, e] : failed) h(e);
}

void RdmaClient::pump_locked(std::vector<std::pair<rpc::ReplyHandler, Error>>& failed) {
  while (!queued_.empty() && in_flight_ < credits_) {
    Job& job = queued_.front();
    if (issue_locked(job.call, job.handler, failed) == Issue::wait) return;  // out of buffers: wait for replies
    queued_.pop_front();
  }
}

RdmaClient::Issue RdmaClient::issue_locked(const Call& call, rpc::ReplyHandler& handler,
                                           std::vector<std::pair<rpc::ReplyHandler, Error>>& failed) {
  const xdr::Parts& in = call.message;
  const auto total = static_cast<std::uint32_t>(in.stream_bytes());
  rpcrdma::CallShape shape{total, static_cast<std::uint32_t>(in.head.size()), static_cast<std::uint32_t>(in.payload.size()),
                           call.reply_max, call.reply_payload_max};
  rpcrdma::Plan plan = rpcrdma::plan_call(shape, peer_recv_inline_, peer_send_inline_);
  const bool direct_read = call.payload_registered && plan.proc == rpcrdma::RDMA_MSG && plan.read_bytes;
  const bool direct_write = plan.write_bytes && call.direct_reply.size() >= plan.write_bytes;
  const std::size_t cap = bounce_->slot_bytes();
  if ((plan.read_bytes > cap && !direct_read) || (plan.write_bytes > cap && !direct_write) || plan.reply_bytes > cap) {
    failed.emplace_back(std::move(handler), Error{ErrorDomain::rpc, EMSGSIZE, Action::fail,
                                                  "rpc: call or reply larger than the RDMA buffers"});
    return Issue::failed;
  }
  const std::size_t need = (plan.read_bytes && !direct_read ? 1 : 0) + (plan.write_bytes && !direct_write ? 1 : 0) +
                           (plan.reply_bytes ? 1 : 0);
  if (bounce_->available() < need || send_pool_->available() == 0) return Issue::wait;
  Pending p;
  auto bounce_target = [&](std::optional<std::size_t>& slot) {
    slot = bounce_->take();
    return rpcrdma::Target{bounce_->region(*slot).key(), bounce_->region(*slot).remote_address(bounce_->slot(*slot).data())};
  };
  auto caller_target = [&](const void* at, std::size_t n) {
    const CallerRegion* r = region_of(at, n);
    return rpcrdma::Target{r->mr.key(), r->mr.remote_address(at)};
  };
  rpcrdma::ChunkTargets t;
  if (plan.read_bytes) t.read = direct_read ? caller_target(in.payload.data(), in.payload.size()) : bounce_target(p.read_slot);
  if (plan.write_bytes) {
    t.write = direct_write ? caller_target(call.direct_reply.data(), plan.write_bytes) : bounce_target(p.write_slot);
  }
  if (plan.reply_bytes) t.reply = bounce_target(p.reply_slot);
  const rpcrdma::MarshaledCall m = rpcrdma::marshal_call(call.xid, options_.max_credits, plan, total, t);
  if (p.read_slot) {
    in.copy(m.read_from, plan.read_bytes, bounce_->slot(*p.read_slot).data());
    bounce_bytes_ += plan.read_bytes;
  }
  if (direct_write) p.reply_placed = call.direct_reply;
  p.offered = rpcrdma::offers_of(m.header);
  std::size_t slot = *send_pool_->take();
  auto buf = send_pool_->slot(slot);
  head_.clear();
  xdr::Encoder e(head_);
  rpcrdma::encode_header(e, m.header);
  const std::size_t sent = head_.size() + m.head_end + (total - m.tail_from);
  NFSRDMA_CHECK(sent <= buf.size());
  std::memcpy(buf.data(), head_.data(), head_.size());
  in.copy(0, m.head_end, buf.data() + head_.size());
  in.copy(m.tail_from, total - m.tail_from, buf.data() + head_.size() + m.head_end);
  p.handler = std::move(handler);
  auto it = pending_.insert_or_assign(call.xid, std::move(p)).first;
  ++in_flight_;
  credits_in_use().add(1);
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  // The last free buffer's Send is signalled too, so a pool run dry always
  // holds one whose completion frees it, even after a signalled post failed
  // (which reset the count with nothing to complete).
  const bool signalled = ++unsignalled_ >= kSendBatch || send_pool_->available() == 0;
  if (signalled) unsignalled_ = 0;
  if (auto r = ep_->post_send(&send_ctx_[slot].op, buf.data(), sent, send_pool_->desc(slot), signalled); !r) {
    // fabric::post_result says whether the connection or the call is at fault.
    send_pool_->give(slot);
    failed.emplace_back(std::move(it->second.handler), r.error());
    release_locked(it->second);
    pending_.erase(it);
    --in_flight_;
    credits_in_use().add(-1);
    return Issue::failed;
  }
  sends_[(sends_head_ + sends_count_++) % sends_.size()] = slot;
  return Issue::sent;
}

void RdmaClient::retire_sends_locked(std::size_t slot) {
  while (sends_count_ > 0) {
    const std::size_t s = sends_[sends_head_];
    sends_head_ = (sends_head_ + 1) % sends_.size();
    --sends_count_;
    send_pool_->give(s);
    if (s == slot) return;
  }
}

void RdmaClient::release_locked(Pending& p) {
  for (auto* s : {&p.read_slot, &p.write_slot, &p.reply_slot}) {
    if (*s) bounce_->give(**s);
    s->reset();
  }
}

RdmaClient::Settled RdmaClient::settle_locked(const rpcrdma::Decoded& d, std::span<const std::uint8_t> bytes) {
  Settled out;
  auto it = d.failure == rpcrdma::DecodeFailure::too_short ? pending_.end() : pending_.find(d.header.xid);
  if (it == pending_.end()) {
    spdlog::info("rdma: reply from {} for unknown xid {:#x} ignored", peer_, d.header.xid);
    return out;
  }
  Pending p = std::move(it->second);
  pending_.erase(it);
  out.found = true;
  out.handler = std::move(p.handler);
  if (d.failure == rpcrdma::DecodeFailure::none) {
    // RFC 8166 §3.3.1: a grant of 0 still allows one call; never above our maximum.
    credits_ = std::clamp<std::uint32_t>(d.header.credits, 1, options_.max_credits);
  }
  const rpcrdma::ReplyLayout r = rpcrdma::read_reply(d, p.offered);
  if (r.fault == rpcrdma::ReplyFault::overclaim) {
    spdlog::warn("rdma: reply from {} for xid {:#x} refused: {}", peer_, d.header.xid, r.why);
  }
  if (r.fault != rpcrdma::ReplyFault::none) {
    out.outcome = reply_error(r, d.header, peer_);
  } else if (r.in_reply_chunk) {
    // An offer is a bounce buffer's, and read_reply kept the length within it.
    NFSRDMA_CHECK(r.reply_bytes <= bounce_->slot_bytes());
    out.outcome = xdr::Parts{bounce_->slot(*p.reply_slot).first(r.reply_bytes)};
    out.held = std::exchange(p.reply_slot, std::nullopt);
  } else {
    // Data in the Write chunk is the reply's payload, and the inline part
    // ends at its length word; read_reply kept the length within the offer,
    // and the offer is within the caller's memory or a bounce buffer.
    std::span<const std::uint8_t> placed;
    if (!p.reply_placed.empty()) {
      NFSRDMA_CHECK(r.write_bytes <= p.reply_placed.size());
      placed = p.reply_placed.first(r.write_bytes);
    } else if (r.write_bytes > 0 && p.write_slot) {
      NFSRDMA_CHECK(r.write_bytes <= bounce_->slot_bytes());
      placed = bounce_->slot(*p.write_slot).first(r.write_bytes);
      out.held = std::exchange(p.write_slot, std::nullopt);
      bounce_bytes_ += r.write_bytes;
    }
    out.outcome = xdr::Parts{bytes.subspan(r.inline_from), placed, {}};
  }
  release_locked(p);
  return out;
}

void RdmaClient::on_reply(std::size_t slot, std::size_t len) {
  auto bytes = recv_pool_->slot(slot).first(len);
  const rpcrdma::Decoded d = rpcrdma::decode_header(bytes);
  Settled settled;
  {
    std::lock_guard lk(mu_);
    settled = settle_locked(d, bytes);
  }
  // The reply is in the receive buffer (and a bounce buffer), reposted (and
  // given back) once the handler ran.
  if (settled.handler) settled.handler(std::move(settled.outcome));
  auto buf = recv_pool_->slot(slot);
  if (!stopping_) {
    if (auto r = ep_->post_recv(&recv_ctx_[slot].op, buf.data(), buf.size(), recv_pool_->desc(slot)); !r) {
      spdlog::warn("rdma: cannot repost a receive: {}", r.error().describe());
    }
  }
  std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
  {
    // ORDER: the call's credit comes back only now, with its receive posted
    // again, so there is a receive for every call in flight.
    std::lock_guard lk(mu_);
    if (settled.found && !broken_) {  // fail_all() already counted it out
      --in_flight_;
      credits_in_use().add(-1);
    }
    if (settled.held) bounce_->give(*settled.held);
    pump_locked(failed);
  }
  for (auto& [h, e] : failed) h(e);
}

void RdmaClient::fail_all(const Error& e) {
  std::vector<rpc::ReplyHandler> handlers;
  {
    std::lock_guard lk(mu_);
    broken_ = true;
    for (auto& [xid, p] : pending_) {
      handlers.push_back(std::move(p.handler));
      release_locked(p);
    }
    pending_.clear();
    for (auto& j : queued_) handlers.push_back(std::move(j.handler));
    queued_.clear();
    credits_in_use().add(-static_cast<std::int64_t>(in_flight_));
    in_flight_ = 0;
  }
  for (auto& h : handlers) h(e);
}

void RdmaClient::progress_loop() {
  while (!stopping_ && step(200)) {
  }
}

Result<std::size_t> RdmaClient::progress(int timeout_ms) {
  if (!options_.caller_progress) return std::size_t{0};
  {
    std::lock_guard lk(mu_);
    if (broken_) return Error{ErrorDomain::rpc, ENOTCONN, Action::reconnect, "rpc: RDMA connection to " + peer_ + " is down"};
  }
  return step(timeout_ms);
}

int RdmaClient::wait_fd() { return options_.caller_progress ? ep_->wait_fd() : -1; }

bool RdmaClient::try_wait() { return ep_->wait_fd() < 0 || ep_->try_wait(); }

bool RdmaClient::cm_look_due(int timeout_ms) {
  constexpr std::int64_t kCmLookNs = 10'000'000;
  const std::int64_t now = steady_ns();
  if (timeout_ms <= 0 && now - last_cm_look_ns_.load(std::memory_order_relaxed) < kCmLookNs) return false;
  last_cm_look_ns_.store(now, std::memory_order_relaxed);
  return true;
}

Result<std::size_t> RdmaClient::step(int timeout_ms) {
  fabric::Completion c[32];
  auto n = ep_->poll(c, timeout_ms);
  std::optional<Error> why;  // made only when the connection broke
  if (!n) why = n.error();
  for (std::size_t i = 0; n && i < *n; ++i) {
    auto* ctx = static_cast<SlotCtx*>(c[i].context);
    if (c[i].error) {
      why = Error{ErrorDomain::rpc, ECONNRESET, Action::reconnect,
                  "rpc: RDMA operation to " + peer_ + " failed: " + std::strerror(c[i].error)};
      continue;
    }
    if (ctx->recv) {
      on_reply(ctx->slot, c[i].len);
    } else {
      std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
      {
        std::lock_guard lk(mu_);
        retire_sends_locked(ctx->slot);
        pump_locked(failed);
      }
      for (auto& [h, e] : failed) h(e);
    }
  }
  // The connection manager's events are read after a wait that found
  // nothing, and at most every kCmLookNs by a reaper that looks without
  // waiting (each look is a syscall on the tcp provider: 0.2 a call at depth
  // 32). A reaper of several connections may never wait on this one, and on
  // InfiniBand or RoCE a peer's disconnect flushes no receive here.
  if (!why && *n == 0 && cm_look_due(timeout_ms) && ep_->peer_gone()) {
    why = Error{ErrorDomain::rpc, ECONNRESET, Action::reconnect, "rpc: RDMA connection to " + peer_ + " closed"};
  }
  if (!why) return *n;
  if (!stopping_) fail_all(*why);
  return *why;
}

}  // namespace nfsrdma::rdma
