#include "lib/transport/rdma/rdma_client.hpp"

#include <cstring>
#include <optional>
#include <string>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/rpcrdma/chunk_plan.hpp"
#include "lib/rpcrdma/private_data.hpp"

namespace nfsrdma::rdma {

namespace {
// Calls in flight under the server's credits, summed over this process's connections.
metrics::Gauge& credits_in_use() {
  static metrics::Gauge& g = metrics::registry().gauge("nfsrdma_client_rdma_credits_in_use",
                                                       "RPC-over-RDMA calls in flight, within the granted credits");
  return g;
}

// RFC 8166 §3.4.6: a returned chunk carries the segments its call offered,
// with lengths cut to what was placed. Says what a reply claims beyond that
// (bytes the server never wrote there, or another call's memory), if anything.
std::optional<std::string> overclaim(const rpcrdma::Header& h, const std::optional<rpcrdma::Segment>& write,
                                     const std::optional<rpcrdma::Segment>& reply) {
  auto beyond = [](const rpcrdma::WriteChunk& c, const std::optional<rpcrdma::Segment>& offered) {
    if (c.segments.empty()) return false;
    if (!offered || c.segments.size() != 1) return true;
    const rpcrdma::Segment& s = c.segments[0];
    return s.handle != offered->handle || s.offset != offered->offset || s.length > offered->length;
  };
  if (h.write_list.size() > 1 || (!h.write_list.empty() && beyond(h.write_list[0], write))) {
    return "returned a Write chunk beyond what the call offered";
  }
  if (h.reply_chunk && beyond(*h.reply_chunk, reply)) return "returned a Reply chunk beyond what the call offered";
  return std::nullopt;
}
}  // namespace

using rpcrdma::Header;

Result<std::unique_ptr<RdmaClient>> RdmaClient::connect(const std::string& host, std::uint16_t port,
                                                        RdmaClientOptions options) {
  std::unique_ptr<RdmaClient> c(new RdmaClient);
  c->options_ = options;
  c->peer_ = host + ":" + std::to_string(port);
  auto prov = fabric::choose_provider(options.provider);
  if (!prov) return prov.error();
  c->provider_ = *prov;
  auto info = fabric::get_info(c->provider_, host, std::to_string(port), false);
  if (!info) return info.error();
  // A domain of our own: the only memory a server can reach is this connection's buffers.
  auto domain = fabric::Domain::open(info->get());
  if (!domain) return domain.error();
  c->domain_ = std::move(*domain);
  const std::uint32_t n = options.max_credits;
  auto rp = SlotPool::create(*c->domain_, n, options.inline_bytes, false);
  if (!rp) return rp.error();
  c->recv_pool_ = std::move(*rp);
  auto sp = SlotPool::create(*c->domain_, n, options.inline_bytes, false);
  if (!sp) return sp.error();
  c->send_pool_ = std::move(*sp);
  auto bp = SlotPool::create(*c->domain_, options.bounce_slots, options.bounce_bytes, true);
  if (!bp) return bp.error();
  c->bounce_ = std::move(*bp);
  c->recv_ctx_.resize(n);
  c->send_ctx_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    c->recv_ctx_[i] = {{}, true, i};
    c->send_ctx_[i] = {{}, false, i};
  }
  rpcrdma::ConnectPrivate mine;
  mine.send_size = options.inline_bytes;
  mine.recv_size = options.inline_bytes;
  auto priv = rpcrdma::encode_private(mine);
  std::vector<std::uint8_t> theirs;
  RdmaClient* self = c.get();
  auto ep = fabric::Endpoint::connect(*c->domain_, info->get(), priv, theirs, options.connect_timeout_ms, n * 2 + 64,
                                      [self](fabric::Endpoint& e) -> Result<void> {
                                        for (std::size_t i = 0; i < self->recv_ctx_.size(); ++i) {
                                          auto buf = self->recv_pool_->slot(i);
                                          if (auto r = e.post_recv(&self->recv_ctx_[i].op, buf.data(), buf.size(),
                                                                   self->recv_pool_->region().desc());
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
  c->peer_recv_inline_ = rpcrdma::peer_receive_inline(rpcrdma::decode_private(theirs), options.inline_bytes);
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
  Job job;
  job.xid = call.xid;
  job.payload_offset = static_cast<std::uint32_t>(call.message.size());
  job.payload_bytes = static_cast<std::uint32_t>(call.payload.size());
  job.reply_max = call.reply_max_bytes;
  job.reply_payload_max = call.reply_payload_max;
  job.handler = std::move(on_reply);
  bool direct = false;
  {
    std::lock_guard lk(mu_);
    direct = region_of(call.payload.data(), call.payload.size()) != nullptr;
    if (region_of(call.reply_payload.data(), call.reply_payload.size())) job.direct_reply = call.reply_payload;
  }
  // Zero copy for payloads in registered caller memory: the message keeps only
  // the bytes around it, and the Read chunk will point at the caller's data.
  // Otherwise the payload is copied here, outside the lock.
  job.message.reserve(call.message.size() + (direct ? 0 : xdr::pad4(call.payload.size())) + call.tail.size());
  job.message.assign(call.message.begin(), call.message.end());
  if (direct) {
    job.direct_payload = call.payload;
  } else {
    job.message.insert(job.message.end(), call.payload.begin(), call.payload.end());
    job.message.resize(job.message.size() + (xdr::pad4(call.payload.size()) - call.payload.size()), 0);
  }
  job.message.insert(job.message.end(), call.tail.begin(), call.tail.end());
  std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
  {
    std::lock_guard lk(mu_);
    if (broken_) {
      failed.emplace_back(std::move(job.handler),
                          Error{ErrorDomain::rpc, ENOTCONN, Action::reconnect, "rpc: RDMA connection to " + peer_ + " is down"});
    } else {
      queued_.push_back(std::move(job));
      pump_locked(failed);
    }
  }
  for (auto& [h, e] : failed) h(e);
}

void RdmaClient::pump_locked(std::vector<std::pair<rpc::ReplyHandler, Error>>& failed) {
  while (!queued_.empty() && in_flight_ < credits_) {
    if (!issue_locked(queued_.front(), failed)) return;  // out of buffers: wait for replies
    queued_.pop_front();
  }
}

bool RdmaClient::issue_locked(Job& job, std::vector<std::pair<rpc::ReplyHandler, Error>>& failed) {
  const auto padded_direct = static_cast<std::uint32_t>(xdr::pad4(job.direct_payload.size()));
  rpcrdma::CallShape shape{static_cast<std::uint32_t>(job.message.size()) + padded_direct, job.payload_offset,
                           job.payload_bytes, job.reply_max, job.reply_payload_max};
  rpcrdma::Plan plan = rpcrdma::plan_call(shape, peer_recv_inline_, options_.inline_bytes);
  const bool direct_read = !job.direct_payload.empty() && plan.proc == rpcrdma::RDMA_MSG && plan.read_bytes;
  const bool direct_write = plan.write_bytes && job.direct_reply.size() >= plan.write_bytes;
  if (!job.direct_payload.empty() && !direct_read) {
    // The plan wants the whole call in one place (RDMA_NOMSG) or inline: rejoin it.
    std::vector<std::uint8_t> whole(job.message.begin(), job.message.begin() + job.payload_offset);
    whole.insert(whole.end(), job.direct_payload.begin(), job.direct_payload.end());
    whole.resize(whole.size() + (padded_direct - job.direct_payload.size()), 0);
    whole.insert(whole.end(), job.message.begin() + job.payload_offset, job.message.end());
    job.message = std::move(whole);
    job.direct_payload = {};
    return issue_locked(job, failed);
  }
  const std::size_t cap = bounce_->slot_bytes();
  if ((plan.read_bytes > cap && !direct_read) || (plan.write_bytes > cap && !direct_write) || plan.reply_bytes > cap) {
    failed.emplace_back(std::move(job.handler), Error{ErrorDomain::rpc, EMSGSIZE, Action::fail,
                                                      "rpc: call or reply larger than the RDMA buffers"});
    return true;
  }
  const std::size_t need = (plan.read_bytes && !direct_read ? 1 : 0) + (plan.write_bytes && !direct_write ? 1 : 0) +
                           (plan.reply_bytes ? 1 : 0);
  if (bounce_->available() < need || send_pool_->available() == 0) return false;
  Pending p;
  p.handler = std::move(job.handler);
  Header h;
  h.xid = job.xid;
  h.credits = options_.max_credits;
  h.proc = plan.proc;
  auto segment_for = [&](std::optional<std::size_t>& slot, std::uint32_t bytes) {
    slot = bounce_->take();
    auto mem = bounce_->slot(*slot);
    return rpcrdma::Segment{bounce_->region().key(), bytes, bounce_->region().remote_address(mem.data())};
  };
  std::span<const std::uint8_t> inline_a = job.message, inline_b;
  if (direct_read) {
    const CallerRegion* r = region_of(job.direct_payload.data(), job.direct_payload.size());
    h.read_list.push_back({plan.read_position, {r->mr.key(), plan.read_bytes, r->mr.remote_address(job.direct_payload.data())}});
    inline_a = std::span(job.message).first(job.payload_offset);
    inline_b = std::span(job.message).subspan(job.payload_offset);
  } else if (plan.read_bytes) {
    rpcrdma::Segment s = segment_for(p.read_slot, plan.read_bytes);
    const std::uint8_t* src = job.message.data() + (plan.proc == rpcrdma::RDMA_NOMSG ? 0 : plan.read_position);
    std::memcpy(bounce_->slot(*p.read_slot).data(), src, plan.read_bytes);
    bounce_bytes_ += plan.read_bytes;
    h.read_list.push_back({plan.read_position, s});
    if (plan.proc == rpcrdma::RDMA_NOMSG) {
      inline_a = {};
    } else {
      inline_a = std::span(job.message).first(plan.read_position);
      inline_b = std::span(job.message).subspan(plan.read_position + xdr::pad4(plan.read_bytes));
    }
  }
  if (direct_write) {
    const CallerRegion* r = region_of(job.direct_reply.data(), plan.write_bytes);
    rpcrdma::WriteChunk w;
    w.segments.push_back({r->mr.key(), plan.write_bytes, r->mr.remote_address(job.direct_reply.data())});
    h.write_list.push_back(w);
    p.reply_placed = true;
    p.write_offered = w.segments[0];
  } else if (plan.write_bytes) {
    rpcrdma::WriteChunk w;
    w.segments.push_back(segment_for(p.write_slot, plan.write_bytes));
    h.write_list.push_back(w);
    p.write_offered = w.segments[0];
  }
  if (plan.reply_bytes) {
    rpcrdma::WriteChunk r;
    r.segments.push_back(segment_for(p.reply_slot, plan.reply_bytes));
    h.reply_chunk = r;
    p.reply_offered = r.segments[0];
  }
  std::size_t slot = *send_pool_->take();
  auto buf = send_pool_->slot(slot);
  std::vector<std::uint8_t> head;
  xdr::Encoder e(head);
  rpcrdma::encode_header(e, h);
  const std::size_t total = head.size() + inline_a.size() + inline_b.size();
  NFSRDMA_CHECK(total <= buf.size());
  std::memcpy(buf.data(), head.data(), head.size());
  if (!inline_a.empty()) std::memcpy(buf.data() + head.size(), inline_a.data(), inline_a.size());
  if (!inline_b.empty()) std::memcpy(buf.data() + head.size() + inline_a.size(), inline_b.data(), inline_b.size());
  pending_[job.xid] = std::move(p);
  ++in_flight_;
  credits_in_use().add(1);
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  if (auto r = ep_->post_send(&send_ctx_[slot].op, buf.data(), total, send_pool_->region().desc()); !r) {
    send_pool_->give(slot);
    auto it = pending_.find(job.xid);
    failed.emplace_back(std::move(it->second.handler), r.error());
    release_locked(it->second);
    pending_.erase(it);
    --in_flight_;
    credits_in_use().add(-1);
  }
  return true;
}

void RdmaClient::release_locked(Pending& p) {
  for (auto* s : {&p.read_slot, &p.write_slot, &p.reply_slot}) {
    if (*s) bounce_->give(**s);
    s->reset();
  }
}

void RdmaClient::on_reply(std::size_t slot, std::size_t len) {
  auto bytes = recv_pool_->slot(slot).first(len);
  rpcrdma::Decoded d = rpcrdma::decode_header(bytes);
  std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
  rpc::ReplyHandler handler;
  std::vector<std::uint8_t> reply;
  Error error;
  bool ok = false;
  {
    std::lock_guard lk(mu_);
    auto it = d.failure == rpcrdma::DecodeFailure::too_short ? pending_.end() : pending_.find(d.header.xid);
    if (it == pending_.end()) {
      spdlog::info("rdma: reply from {} for unknown xid {:#x} ignored", peer_, d.header.xid);
    } else {
      Pending p = std::move(it->second);
      pending_.erase(it);
      --in_flight_;
      credits_in_use().add(-1);
      handler = std::move(p.handler);
      if (d.failure == rpcrdma::DecodeFailure::none) {
        // RFC 8166 §3.3.1: a grant of 0 still allows one call; never above our maximum.
        credits_ = std::clamp<std::uint32_t>(d.header.credits, 1, options_.max_credits);
      }
      const Header& h = d.header;
      if (d.failure != rpcrdma::DecodeFailure::none) {
        error = Error{ErrorDomain::rpc, EPROTO, Action::reconnect, "rpcrdma: unparseable reply header from " + peer_};
      } else if (h.proc == rpcrdma::RDMA_ERROR) {
        error = h.error == rpcrdma::ERR_VERS
                    ? Error{ErrorDomain::rpc, EPROTONOSUPPORT, Action::fail,
                            "rpcrdma: server " + peer_ + " does not speak RPC-over-RDMA version 1 (ERR_VERS " +
                                std::to_string(h.vers_low) + "-" + std::to_string(h.vers_high) + ")"}
                    : Error{ErrorDomain::rpc, EPROTO, Action::fail,
                            "rpcrdma: server " + peer_ + " refused the call's chunk lists (ERR_CHUNK)"};
      } else if (auto lie = overclaim(h, p.write_offered, p.reply_offered)) {
        spdlog::warn("rdma: reply from {} for xid {:#x} refused: {}", peer_, h.xid, *lie);
        error = Error{ErrorDomain::rpc, EPROTO, Action::fail, "rpcrdma: server " + peer_ + " " + *lie};
      } else if (h.proc == rpcrdma::RDMA_NOMSG && h.reply_chunk && p.reply_slot) {
        std::uint64_t n = std::min<std::uint64_t>(h.reply_chunk->length(), bounce_->slot_bytes());
        auto src = bounce_->slot(*p.reply_slot).first(n);
        reply.assign(src.begin(), src.end());
        ok = true;
      } else if (h.proc == rpcrdma::RDMA_MSG) {
        auto body = bytes.subspan(d.header_bytes);
        reply.assign(body.begin(), body.end());
        std::uint64_t n = h.write_list.empty() ? 0 : h.write_list[0].length();
        if (n > 0 && p.write_slot) {
          // The reduced item (READ data, READLINK path) is the last item of an
          // NFSv3 reply: it goes back after the inline part, round-up restored.
          n = std::min<std::uint64_t>(n, bounce_->slot_bytes());
          auto data = bounce_->slot(*p.write_slot).first(n);
          reply.insert(reply.end(), data.begin(), data.end());
          reply.resize(reply.size() + (xdr::pad4(n) - n), 0);
          bounce_bytes_ += n;
        }
        // With `reply_placed` the data is already in the caller's memory and
        // the reply stays reduced (see rpc::OutgoingCall::reply_payload).
        ok = true;
      } else {
        error = Error{ErrorDomain::rpc, EPROTO, Action::reconnect, "rpcrdma: unexpected reply from " + peer_};
      }
      release_locked(p);
    }
    pump_locked(failed);
  }
  auto buf = recv_pool_->slot(slot);
  if (!stopping_) {
    if (auto r = ep_->post_recv(&recv_ctx_[slot].op, buf.data(), buf.size(), recv_pool_->region().desc()); !r) {
      spdlog::warn("rdma: cannot repost a receive: {}", r.error().describe());
    }
  }
  if (handler) {
    if (ok) {
      handler(std::span<const std::uint8_t>(reply));
    } else {
      handler(error);
    }
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

Result<std::size_t> RdmaClient::step(int timeout_ms) {
  fabric::Completion c[32];
  Error why{ErrorDomain::rpc, ECONNRESET, Action::reconnect, "rpc: RDMA connection to " + peer_ + " closed"};
  auto n = ep_->poll(c, timeout_ms);
  bool broken = !n;
  if (!n) why = n.error();
  for (std::size_t i = 0; n && i < *n; ++i) {
    auto* ctx = static_cast<SlotCtx*>(c[i].context);
    if (c[i].error) {
      why.message = "rpc: RDMA operation to " + peer_ + " failed: " + std::strerror(c[i].error);
      broken = true;
      continue;
    }
    if (ctx->recv) {
      on_reply(ctx->slot, c[i].len);
    } else {
      send_pool_->give(ctx->slot);
      std::vector<std::pair<rpc::ReplyHandler, Error>> failed;
      {
        std::lock_guard lk(mu_);
        pump_locked(failed);
      }
      for (auto& [h, e] : failed) h(e);
    }
  }
  if (!broken && *n == 0 && ep_->peer_gone()) broken = true;
  if (!broken) return *n;
  if (!stopping_) fail_all(why);
  return why;
}

}  // namespace nfsrdma::rdma
