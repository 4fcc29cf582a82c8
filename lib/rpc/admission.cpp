#include "lib/rpc/admission.hpp"

#include <algorithm>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"

namespace nfsrdma::rpc {
namespace {

constexpr auto kLogInterval = std::chrono::seconds(10);

metrics::Counter& counter(const char* name, const char* help, const std::string& transport, const char* reason = "") {
  metrics::Labels l = {{"transport", transport}};
  if (*reason) l.push_back({"reason", reason});
  return metrics::registry().counter(name, help, l);
}

}  // namespace

Admission::Admission(std::string transport, AdmissionLimits limits)
    : transport_(std::move(transport)), limits_(limits),
      refused_limit_(counter("nfsrdma_server_connections_refused_total", "Connections refused, by reason", transport_,
                             "limit")),
      refused_address_(counter("nfsrdma_server_connections_refused_total", "Connections refused, by reason",
                               transport_, "per_address")),
      evicted_(counter("nfsrdma_server_connections_evicted_total",
                       "Longest-idle connections closed to admit a new one", transport_)),
      idle_closed_(counter("nfsrdma_server_connections_idle_closed_total",
                           "Connections closed after the idle timeout", transport_)) {}

void Admission::note(const char* what, const Peer& peer, const std::string& why) {
  // mu_ held. The first event of an interval is logged; the rest are counted
  // into the next line.
  auto now = Clock::now();
  if (now - last_logged_ < kLogInterval) {
    ++unlogged_;
    return;
  }
  if (unlogged_ > 0) {
    spdlog::warn("{}: {} connection from {}: {} ({} more refused or evicted in the last {} s, not logged)", transport_,
                 what, peer.describe(), why, unlogged_,
                 std::chrono::duration_cast<std::chrono::seconds>(now - last_logged_).count());
  } else {
    spdlog::warn("{}: {} connection from {}: {}", transport_, what, peer.describe(), why);
  }
  last_logged_ = now;
  unlogged_ = 0;
}

Admission::Decision Admission::admit(const Peer& peer) {
  const auto addr = to_v6(peer.addr);
  std::lock_guard lk(mu_);
  Decision d;
  // An address the provider did not give (all zeros) is nobody's in particular.
  const bool known = addr != std::array<std::uint8_t, 16>{};
  auto mine = per_address_.find(addr);
  if (known && mine != per_address_.end() && mine->second >= limits_.max_per_address) {
    refused_address_.inc();
    note("refusing", peer,
         "at the limit of " + std::to_string(limits_.max_per_address) + " connections from one address");
    return d;
  }
  if (limits_.max_connections == 0) {
    refused_limit_.inc();
    note("refusing", peer, "no connections allowed");
    return d;
  }
  if (tickets_.size() >= limits_.max_connections) {
    auto victim = evictee_locked();
    evicted_.inc();
    note("evicting the longest-idle connection of the busiest address for a new", peer,
         "at the limit of " + std::to_string(limits_.max_connections) + " connections");
    d.evict = victim->first;
    if (--per_address_[victim->second->addr_] == 0) per_address_.erase(victim->second->addr_);
    tickets_.erase(victim);
  }
  auto t = std::make_shared<Ticket>();
  t->id_ = next_id_++;
  t->addr_ = addr;
  tickets_[t->id_] = t;
  ++per_address_[addr];
  d.ticket = std::move(t);
  return d;
}

// The longest-idle connection among those of the addresses holding the most:
// a client with a connection or two is not churned out by floods from
// addresses that hold dozens (reconnecting as fast as they are evicted).
std::map<std::uint64_t, std::shared_ptr<Admission::Ticket>>::iterator Admission::evictee_locked() {
  std::size_t most = 0;
  for (const auto& [addr, n] : per_address_) most = std::max(most, n);
  auto victim = tickets_.end();
  for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
    if (per_address_[it->second->addr_] != most) continue;
    if (victim == tickets_.end() || it->second->last_ns_.load() < victim->second->last_ns_.load()) victim = it;
  }
  return victim;
}

void Admission::remove(const Ticket& t) {
  std::lock_guard lk(mu_);
  if (tickets_.erase(t.id_) == 0) return;
  auto it = per_address_.find(t.addr_);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

std::vector<std::uint64_t> Admission::expired() {
  std::vector<std::uint64_t> out;
  if (limits_.idle_timeout.count() == 0) return out;
  const std::int64_t limit = std::chrono::duration_cast<Clock::duration>(limits_.idle_timeout).count();
  const std::int64_t now = Ticket::now_ns();
  std::lock_guard lk(mu_);
  for (auto it = tickets_.begin(); it != tickets_.end();) {
    if (now - it->second->last_ns_.load() <= limit) {
      ++it;
      continue;
    }
    out.push_back(it->first);
    idle_closed_.inc();
    auto pa = per_address_.find(it->second->addr_);
    if (pa != per_address_.end() && --pa->second == 0) per_address_.erase(pa);
    it = tickets_.erase(it);
  }
  return out;
}

std::size_t Admission::size() {
  std::lock_guard lk(mu_);
  return tickets_.size();
}

}  // namespace nfsrdma::rpc
