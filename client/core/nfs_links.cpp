// NfsClient's links: connecting them, the maintenance thread that shuts a
// failed link, moves its calls to the others and reconnects it, progress()
// over the working ones, and the per-connection metrics. The calls
// themselves are in nfs_client.cpp.
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>

#include "client/core/mount_client.hpp"
#include "client/core/nfs_client.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/transport/rdma/rdma_client.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::client {

using namespace nfs3;

namespace {

metrics::Counter& client_counter(const char* name, const char* help) { return metrics::registry().counter(name, help); }
// Made when a client connects, so they read 0 rather than being absent.
metrics::Counter& reconnects_counter() {
  return client_counter("nfsrdma_client_reconnects_total", "Reconnections after a failure or timeout");
}
metrics::Counter& retransmits_counter() {
  return client_counter("nfsrdma_client_retransmits_total", "Calls sent again after a reconnect or on another connection");
}

constexpr int kConnectTimeoutMs = 5000;  // a link that went down is tried again this long, then after a pause
constexpr std::size_t kMaxAddresses = 16;

}  // namespace

Result<std::vector<std::string>> parse_address_list(const std::string& option, const std::string& value) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t to = value.find('~', from);
    std::string a = value.substr(from, to == std::string::npos ? std::string::npos : to - from);
    if (a.empty()) {
      return Error{ErrorDomain::config, EINVAL, Action::fail,
                   option + ": an empty address in '" + value + "' (addresses are separated by ~)"};
    }
    out.push_back(std::move(a));
    if (to == std::string::npos) break;
    from = to + 1;
  }
  if (out.size() > kMaxAddresses) {
    return Error{ErrorDomain::config, EINVAL, Action::fail,
                 option + ": " + std::to_string(out.size()) + " addresses, at most 16"};
  }
  return out;
}

std::string NfsClient::Link::name() const { return (local.empty() ? "" : local + " -> ") + remote; }

Result<std::unique_ptr<NfsClient>> NfsClient::connect(const NfsClientOptions& options) {
  for (const auto& a : options.local_addrs) {
    in6_addr any;
    if (::inet_pton(AF_INET, a.c_str(), &any) != 1 && ::inet_pton(AF_INET6, a.c_str(), &any) != 1) {
      return Error{ErrorDomain::config, EINVAL, Action::fail, "localaddrs: '" + a + "' is not an IP address"};
    }
  }
  std::unique_ptr<NfsClient> c(new NfsClient(options));
  reconnects_counter();
  retransmits_counter();
  char host[256] = "nfsrdma";
  ::gethostname(host, sizeof host - 1);
  c->machine_ = host;
  rpc::AuthSys& cred = c->cred_.emplace();
  cred.machinename = c->machine_;  // a view: machine_ stays
  cred.uid = options.uid;
  cred.gid = options.gid;
  auto root = mount_export(options.host, options.mount_port, options.export_path, cred, options.resvport);
  if (!root) return root.error();
  c->root_ = *root;
  if (options.port != 0) {
    c->nfs_port_ = options.port;
  } else if (options.proto == Proto::rdma) {
    c->nfs_port_ = 20049;  // RFC 5666 §9.1: the registered NFS/RDMA port
  } else {
    auto p = portmap_getport(options.host, kProgram, kVersion);
    c->nfs_port_ = p ? *p : 2049;
  }
  const auto& remotes = options.remote_addrs;
  const auto& locals = options.local_addrs;
  const std::size_t n = std::max({std::size_t(std::max(1, options.nconnect)), remotes.size(), locals.size()});
  c->links_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    Link& l = c->links_[i];
    l.remote = remotes.empty() ? options.host : remotes[i % remotes.size()];
    l.local = locals.empty() ? "" : locals[i % locals.size()];
    auto& r = metrics::registry();
    metrics::Labels labels = {{"connection", std::to_string(i)}, {"local", l.local.empty() ? "any" : l.local},
                              {"remote", l.remote}};
    auto with = [&](const char* k, const char* v) {
      auto out = labels;
      out.emplace_back(k, v);
      return out;
    };
    l.series = {
        &r.counter("nfsrdma_client_connection_calls_total", "NFS calls sent on each connection (resent ones too)", labels),
        &r.counter("nfsrdma_client_connection_bytes_total", "RPC bytes on each connection, data included", with("direction", "sent")),
        &r.counter("nfsrdma_client_connection_bytes_total", "RPC bytes on each connection, data included", with("direction", "received")),
        &r.gauge("nfsrdma_client_connection_up", "Connections working, by index and addresses", labels)};
  }
  // Every link is tried; the mount needs one, the others reconnect later.
  std::vector<std::pair<Link*, Error>> failed;
  std::lock_guard lk(c->mu_);
  for (Link& l : c->links_) {
    auto t = c->make_transport(l, {});
    if (t) {
      c->link_up_locked(l, std::move(*t), 0);
      continue;
    }
    if (t.error().domain == ErrorDomain::config) return t.error();  // no retry mends it
    failed.emplace_back(&l, t.error());
    l.attempts = 1;
    l.retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  }
  if (!c->progressing_ || c->progressing_->empty()) return failed.front().second;
  for (const auto& [l, e] : failed) {
    spdlog::warn("nfs: connection {} failed, retrying in the background: {}", l->name(), e.describe());
  }
  c->maintenance_ = std::thread([p = c.get()] { p->maintenance_loop(); });
  c->reconnector_ = std::thread([p = c.get()] { p->reconnect_loop(); });
  return c;
}

NfsClient::~NfsClient() { shutdown(); }

void NfsClient::shutdown() {
  stopping_ = true;
  cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  if (reconnector_.joinable()) reconnector_.join();
  Transports old;
  std::vector<std::pair<Done, Error>> parked;
  std::vector<Call*> left;
  {
    std::lock_guard lk(mu_);
    for (Link& l : links_) {
      if (l.transport) {
        l.series.up->add(-1);
        old.push_back(std::move(l.transport));
      }
      std::ranges::move(l.parked, std::back_inserter(parked));
      l.parked.clear();
    }
    progressing_.reset();
    for (auto& [xid, c] : calls_) {
      c->link = -1;  // the transports' handlers, run by shutdown(), only let go of it
      left.push_back(c);
    }
    calls_.clear();
  }
  for (auto& t : old) t->shutdown();
  for (Call* c : left) {
    c->done(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"});
    delete c;  // nothing else holds it now: shutdown() ran every handler, and no thread calls in
  }
  for (auto& [d, e] : parked) d(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"});
}

Result<std::shared_ptr<rpc::ClientTransport>> NfsClient::make_transport(
    const Link& link, const std::vector<std::span<std::uint8_t>>& regions) {
  std::shared_ptr<rpc::ClientTransport> t;
  if (options_.proto == Proto::rdma) {
    rdma::RdmaClientOptions o;
    o.provider = options_.provider;
    o.max_credits = options_.credits;
    o.caller_progress = options_.caller_progress;
    o.wait_fd = links_.size() > 1;  // progress() waits on them all at once
    o.source_address = link.local;
    o.connect_timeout_ms = kConnectTimeoutMs;
    auto c = rdma::RdmaClient::connect(link.remote, nfs_port_, o);
    if (!c) return c.error();
    t = std::move(*c);
  } else {
    auto c = tcp::TcpClient::connect(link.remote, nfs_port_,
                                     {.reserved_port = options_.resvport, .source_address = link.local,
                                      .connect_timeout_ms = kConnectTimeoutMs,
                                      .caller_progress = options_.caller_progress});
    if (!c) return c.error();
    t = std::move(*c);
  }
  for (auto r : regions) {
    if (auto reg = t->register_memory(r); !reg) return reg.error();
  }
  return t;
}

void NfsClient::link_up_locked(Link& link, std::shared_ptr<rpc::ClientTransport> t, std::size_t registered) {
  // Regions added while it was connecting.
  for (std::size_t i = registered; i < regions_.size(); ++i) {
    if (auto reg = t->register_memory(regions_[i]); !reg) {
      spdlog::error("nfs: registering memory on connection {}: {}", link.name(), reg.error().describe());
    }
  }
  link.transport = std::move(t);
  link.connection = ++connections_;
  link.attempts = 0;
  link.series.up->add(1);
  Transports working;
  for (const Link& l : links_) {
    if (l.transport) working.push_back(l.transport);
  }
  progressing_ = std::make_shared<const Transports>(std::move(working));
}

void NfsClient::fail_link_locked(Link& link, const std::string& why) {
  if (link.failing || !link.transport) return;
  spdlog::info("nfs: connection {} lost ({}); {}", link.name(), why,
               links_.size() > 1 ? "its calls go on the others while it reconnects" : "reconnecting");
  link.failing = true;
  cv_.notify_all();
}

void NfsClient::leave_link_locked(Call& c) {
  if (c.link >= 0 && links_[c.link].connection == c.via && links_[c.link].in_flight > 0) --links_[c.link].in_flight;
  c.link = -1;
}

std::vector<NfsClient::Sending> NfsClient::place_waiting_locked() {
  std::vector<Sending> out;
  std::size_t resent = 0;
  for (auto& [xid, c] : calls_) {
    if (c->link >= 0) continue;
    const bool again = c->sent;
    auto o = prepare_locked(*c);
    if (!o) break;  // no link works
    out.push_back(std::move(*o));
    resent += again;
  }
  if (resent) retransmits_counter().inc(resent);
  return out;
}

void NfsClient::maintenance_loop() {
  const auto timeo = std::chrono::milliseconds(options_.timeo_ds * 100);
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (stopping_) break;
    // Timeouts: RDMA has no keep-alive, so a call with no answer fails its link.
    auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<Done, Error>> expired;
    for (auto it = calls_.begin(); it != calls_.end();) {
      Call& c = *(it++)->second;  // end_locked unindexes it
      const bool waited = now - c.sent_at > timeo;
      // A soft mount gives up on a call after retrans timeouts, or one that
      // found no link for as long.
      if (!options_.hard && ((waited && c.link >= 0 && ++c.timeouts > options_.retrans) ||
                             (c.link < 0 && now - c.sent_at > timeo * (options_.retrans + 1)))) {
        end_locked(c, Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "nfs: server " + options_.host + " timed out"},
                   expired);
        continue;
      }
      if (waited && c.link >= 0) {
        c.sent_at = now;  // one timeout counted per timeo
        fail_link_locked(links_[c.link], "server " + links_[c.link].remote + " not responding");
      }
    }
    if (!expired.empty()) {
      lk.unlock();
      for (auto& [d, e] : expired) d(std::move(e));
      lk.lock();
    }
    shut_failed_links(lk);
  }
}

void NfsClient::shut_failed_links(std::unique_lock<std::mutex>& lk) {
  Transports old;
  for (Link& l : links_) {
    if (!l.failing || !l.transport) continue;
    l.closing = true;
    l.series.up->add(-1);
    old.push_back(std::move(l.transport));
  }
  if (old.empty()) return;
  Transports working;
  for (const Link& l : links_) {
    if (l.transport) working.push_back(l.transport);
  }
  progressing_ = std::make_shared<const Transports>(std::move(working));
  lk.unlock();
  // ORDER: shut before the calls parked on it are answered, so no late RDMA
  // Write lands in a buffer given back; and before its other calls go
  // again, so no reply comes twice. Meanwhile they stay on it: a reply that
  // still comes on it counts, and a call ended meanwhile is parked there.
  for (auto& t : old) t->shutdown();
  old.clear();
  lk.lock();
  std::vector<std::pair<Done, Error>> parked;
  for (Link& l : links_) {
    if (!l.closing) continue;
    l.closing = l.failing = false;
    l.in_flight = 0;
    l.retry_at = std::chrono::steady_clock::now();
    std::ranges::move(l.parked, std::back_inserter(parked));
    l.parked.clear();
    const auto index = static_cast<int>(&l - links_.data());
    for (auto& [xid, c] : calls_) {
      if (c->link == index) c->link = -1;
    }
  }
  auto again = place_waiting_locked();
  if (!again.empty()) spdlog::info("nfs: {} calls sent again on the connections still working", again.size());
  cv_.notify_all();  // the reconnector: a link to bring back
  lk.unlock();
  for (auto& [d, e] : parked) d(std::move(e));
  for (const auto& o : again) transmit(o);
  lk.lock();
}

void NfsClient::reconnect_loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(100));
    for (std::size_t i = 0; i < links_.size() && !stopping_; ++i) {
      const Link& now = links_[i];
      if (now.transport || now.closing || std::chrono::steady_clock::now() < now.retry_at) continue;
      const Link link = {now.local, now.remote};  // the addresses, copied: connecting takes a while
      auto regions = regions_;                    // ones added meanwhile are registered after
      lk.unlock();
      auto t = make_transport(link, regions);
      lk.lock();
      Link& l = links_[i];
      if (stopping_) break;
      if (!t) {
        if (++l.attempts == 1 || l.attempts % 20 == 0) {
          spdlog::warn("nfs: reconnecting {}: {}", l.name(), t.error().describe());
        } else {
          spdlog::debug("nfs: reconnecting {}, attempt {}: {}", l.name(), l.attempts, t.error().describe());
        }
        l.retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(100 * l.attempts, 1000));
        continue;
      }
      link_up_locked(l, std::move(*t), regions.size());
      ++reconnects_;
      reconnects_counter().inc();
      auto again = place_waiting_locked();
      spdlog::info("nfs: reconnected {}{}", l.name(),
                   again.empty() ? "" : "; resending " + std::to_string(again.size()) + " calls");
      lk.unlock();
      for (const auto& o : again) transmit(o);
      lk.lock();
    }
  }
}

std::size_t NfsClient::progress(int timeout_ms) {
  std::shared_ptr<const Transports> held;
  {
    std::lock_guard lk(mu_);
    held = progressing_;  // held here: a reconnect may drop them meanwhile
  }
  static const Transports none;
  const Transports& ts = held ? *held : none;
  std::size_t ran = 0;
  bool broken = ts.empty();
  // nconnect: a look at each, then a wait on all of them at once.
  for (auto& t : ts) {
    auto n = t->progress(ts.size() == 1 ? timeout_ms : 0);
    if (n) ran += *n;
    broken |= !n;
  }
  if (ran == 0 && !broken && ts.size() > 1 && timeout_ms > 0) ran = wait_any(ts, timeout_ms);
  // Broken or being remade: the maintenance thread brings new connections.
  if (ran == 0 && broken && timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
  return ran;
}

std::size_t NfsClient::wait_any(const Transports& ts, int timeout_ms) {
  std::array<pollfd, 32> fds;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::size_t n = 0;
    bool ready = false;
    for (auto& t : ts) {
      // A transport with no descriptor, or past the set's room, is looked
      // at after each slice below.
      const int fd = t->wait_fd();
      if (fd < 0 || n == fds.size()) continue;
      if (!t->try_wait()) {
        ready = true;
        break;
      }
      fds[n++] = {fd, POLLIN, 0};
    }
    if (!ready) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return 0;
      // In slices: a connection's end on verbs flushes nothing into the
      // queue, and its event is read by a progress() that finds nothing
      // (RdmaClient::cm_look_due), every 10 ms at most; so is a transport
      // left out of the set.
      if (::poll(fds.data(), n, static_cast<int>(std::min<long long>(left, 10))) < 0 && errno != EINTR) return 0;
    }
    // What woke it may have run nothing (part of a record, the end of a
    // slice): then the wait goes on.
    std::size_t ran = 0;
    for (auto& t : ts) {
      auto got = t->progress(0);
      if (!got) return ran;  // broken: the next progress() sees it
      ran += *got;
    }
    if (ran > 0) return ran;
  }
}

NfsClient::SendBatch::SendBatch(NfsClient& client) {
  {
    std::lock_guard lk(client.mu_);
    held_ = client.progressing_;
  }
  if (held_)
    for (auto& t : *held_) t->hold_sends();
}

NfsClient::SendBatch::~SendBatch() {
  if (held_)
    for (auto& t : *held_) t->send_held();
}

Result<void> NfsClient::register_memory(std::span<std::uint8_t> region) {
  std::lock_guard lk(mu_);
  for (Link& l : links_) {
    if (!l.transport) continue;
    if (auto r = l.transport->register_memory(region); !r) return r;
  }
  regions_.push_back(region);
  return {};
}

std::vector<NfsClient::LinkState> NfsClient::links() {
  std::lock_guard lk(mu_);
  std::vector<LinkState> out;
  for (const Link& l : links_) out.push_back({l.local, l.remote, l.transport && !l.failing, l.calls});
  return out;
}

}  // namespace nfsrdma::client
