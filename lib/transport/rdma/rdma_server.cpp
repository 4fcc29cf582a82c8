#include "lib/transport/rdma/rdma_server.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"
#include "lib/transport/rdma/progress_loop.hpp"
#include "lib/transport/rdma/server_connection.hpp"

namespace nfsrdma::rdma {

Result<std::unique_ptr<RdmaServer>> RdmaServer::start(const RdmaServerOptions& options, rpc::CallHandler handler) {
  std::unique_ptr<RdmaServer> s(new RdmaServer);
  s->options_ = options;
  s->handler_ = std::move(handler);
  auto prov = fabric::choose_provider(options.provider);
  if (!prov) return prov.error();
  s->provider_ = *prov;
  auto l = fabric::Listener::listen(s->provider_, options.host, options.port);
  if (!l) return l.error();
  s->listener_ = std::move(*l);
  s->port_ = s->listener_->port();
  s->admission_ = std::make_unique<rpc::Admission>("rdma", options.admission);
  s->budget_ = options.budget;
  if (!s->budget_) {
    const std::size_t limit = rpc::MemoryBudget::default_limit();
    s->own_budget_ = std::make_unique<rpc::MemoryBudget>(limit, limit);
    s->budget_ = s->own_budget_.get();
  }
  std::vector<std::shared_ptr<EventLoop>> on = options.event_loops;
  if (on.empty()) on = s->own_loops_ = EventLoop::make(options.loops, "rdma-loop");
  for (std::size_t i = 0; i < on.size(); ++i) {
    s->loops_.push_back(std::make_shared<ProgressLoop>(*s, on[i], static_cast<int>(i)));
  }
  for (auto& loop : s->own_loops_) loop->start();
  s->acceptor_ = std::thread([p = s.get()] { p->accept_loop(); });
  return s;
}

RdmaServer::~RdmaServer() {
  stop();
  budget_->release(rpc::MemoryBudget::rdma_payload, rpc::kShared, payload_charged_);
}

Result<std::pair<fabric::Domain*, PayloadPool*>> RdmaServer::device_for(const fabric::ConnectRequest& req) {
  auto d = listener_->domain_for(req);
  if (!d) return d.error();
  auto& pool = payloads_[*d];
  if (!pool) {
    auto slots = SlotPool::create(**d, options_.payload_slots, options_.payload_bytes, true);
    if (!slots) return slots.error();
    pool = std::make_unique<PayloadPool>(std::move(*slots));
    // The server's own, shared by every client: counted, never refused.
    const std::size_t bytes = options_.payload_slots * options_.payload_bytes;
    budget_->charge(rpc::MemoryBudget::rdma_payload, rpc::kShared, bytes);
    payload_charged_ += bytes;
  }
  return std::pair{*d, pool.get()};
}

void RdmaServer::stop() {
  if (stopping_.exchange(true)) return;
  if (listener_) listener_->wake();
  if (acceptor_.joinable()) acceptor_.join();
  // Each part drains its connections, then says so; loops of its own end then.
  for (auto& l : loops_) l->wake_now();
  drained_.wait_for(loops_.size());
  for (auto& l : own_loops_) l->stop();
  for (auto& l : own_loops_) l->join();
  std::lock_guard lk(mu_);
  connections_.clear();
}

std::size_t RdmaServer::connection_count() {
  std::lock_guard lk(mu_);
  return connections_.size();
}

std::string RdmaServer::trace(std::size_t per_connection) {
  // Past this the page says it stopped: a thousand connections' full rings
  // are tens of megabytes.
  constexpr std::size_t kMaxBytes = 8 << 20;
  std::vector<std::shared_ptr<ServerConnection>> conns;
  {
    std::lock_guard lk(mu_);
    conns.assign(connections_.begin(), connections_.end());
  }
  std::string out = fmt::format(
      "# RPC-RDMA requests: each connection's last {} state changes, oldest first (seconds ago, xid, request, "
      "state), then each request not free at its latest change, with what it waits on\n",
      per_connection);
  auto name = [](std::uint8_t s) { return state_name(static_cast<State>(s)); };
  for (const auto& c : conns) {
    if (out.size() > kMaxBytes) {
      fmt::format_to(std::back_inserter(out), "# stopped at {} bytes\n", kMaxBytes);
      break;
    }
    const auto events = c->trace().last(per_connection);
    const auto latest = c->trace().latest();
    const std::int64_t now = steady_ns();  // after the reads: no change is in the future
    auto ago = [now](std::int64_t ns) { return (now - ns) / 1e9; };
    fmt::format_to(std::back_inserter(out), "connection {}\n", c->peer().describe());
    for (const auto& e : events) {
      fmt::format_to(std::back_inserter(out), "  {:10.6f}  {:#010x}  {:4}  {}\n", ago(e.ns), e.id, e.slot, name(e.state));
    }
    for (const auto& e : latest) {
      if (static_cast<State>(e.state) == State::free) continue;
      fmt::format_to(std::back_inserter(out), "  request {} {} for {:.6f} s (xid {:#010x})\n", e.slot, name(e.state),
                     ago(e.ns), e.id);
    }
  }
  return out;
}

void RdmaServer::reap() {
  std::lock_guard lk(mu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->finished()) {
      admission_->remove((*it)->ticket());
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void RdmaServer::close_connections(const std::vector<std::uint64_t>& tickets) {
  if (tickets.empty()) return;
  std::lock_guard lk(mu_);
  for (auto& c : connections_) {
    if (std::find(tickets.begin(), tickets.end(), c->ticket().id()) != tickets.end()) {
      spdlog::debug("rdma: closing the connection from {} (idle, or evicted)", c->peer().describe());
      c->close();
    }
  }
}

void RdmaServer::accept_loop() {
  auto next_expiry = std::chrono::steady_clock::now();
  while (!stopping_) {
    auto req = listener_->wait_request(200);
    reap();
    if (std::chrono::steady_clock::now() >= next_expiry) {
      close_connections(admission_->expired());
      next_expiry = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (!req) {
      // A request the provider could not describe: libfabric's verbs
      // provider knows only the devices present when this process started.
      NFSRDMA_LOG_LIMITED(warn, "rdma: a connection request failed: {}{}", req.error().describe(),
                          req.error().code == FI_ENODATA ? " (an RDMA device added since the server started? restart it)" : "");
      continue;
    }
    if (!*req) continue;
    rpc::Peer peer;
    if (!(*req)->peer_address(peer.addr, peer.len)) peer.len = 0;
    auto d = admission_->admit(peer);
    if (!d.ticket) {
      listener_->reject(**req);
      continue;
    }
    if (d.evict) close_connections({*d.evict});
    auto conn = std::make_shared<ServerConnection>(*this, d.ticket, peer);
    if (!conn->admit_memory()) {
      NFSRDMA_LOG_LIMITED(warn, "rdma: refusing a connection from {}: the memory budget ({} MiB, {} MiB per address) is spent",
                          peer.describe(), budget_->limit() >> 20, budget_->per_address() >> 20);
      admission_->remove(*d.ticket);
      listener_->reject(**req);
      continue;
    }
    if (auto r = conn->setup(**req); !r) {
      spdlog::warn("rdma: accepting a connection failed: {}", r.error().describe());
      admission_->remove(*d.ticket);
      continue;
    }
    auto loop = std::min_element(loops_.begin(), loops_.end(),
                                 [](const auto& a, const auto& b) { return a->load() < b->load(); });
    (*loop)->add(conn);
    std::lock_guard lk(mu_);
    connections_.push_back(std::move(conn));
  }
}

}  // namespace nfsrdma::rdma
