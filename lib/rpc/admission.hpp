// Which connections a server transport keeps: the one policy both transports
// (tcp, rdma) apply, so no client can hold the server's connections.
//
//   - At most `max_per_address` connections from one address: past it, refused
//     (a connection whose address the transport could not tell is not counted).
//   - At most `max_connections` in all: past it, the longest-idle connection
//     of the address holding the most is evicted to make room (Linux's svc
//     closes its oldest), so idle or abandoned connections cannot lock
//     newcomers out, and addresses flooding reconnects churn each other, not
//     a client that holds one or two.
//   - A connection idle (nothing received, nothing sent) for `idle_timeout` is
//     closed, as nfsd closes idle temporary transports; NFS clients reconnect
//     transparently when they next have work.
// Refusals and evictions are counted in metrics and logged at most once per
// interval with a count of what was not logged, so a flood of attempts
// costs a flood of nothing.
//
// Thread-safe. A transport admits each new connection, touches its Ticket on
// every message received or sent, removes it when it closes, and periodically
// asks for the connections to close (expired()).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lib/rpc/transport.hpp"

namespace nfsrdma::metrics {
class Counter;
}

namespace nfsrdma::rpc {

struct AdmissionLimits {
  std::size_t max_connections = 1024;
  std::size_t max_per_address = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(6)};  // 0: never
};

class Admission {
 public:
  using Clock = std::chrono::steady_clock;

  // One admitted connection; the transport keeps it with the connection.
  class Ticket {
   public:
    void touch() { last_ns_.store(now_ns(), std::memory_order_relaxed); }
    std::uint64_t id() const { return id_; }

   private:
    friend class Admission;
    static std::int64_t now_ns() { return Clock::now().time_since_epoch().count(); }
    std::uint64_t id_ = 0;
    std::array<std::uint8_t, 16> addr_{};
    std::atomic<std::int64_t> last_ns_{now_ns()};
  };

  struct Decision {
    std::shared_ptr<Ticket> ticket;   // null: refused
    std::optional<std::uint64_t> evict;  // close this connection first (its Ticket id)
  };

  Admission(std::string transport, AdmissionLimits limits);

  // Admits a connection from `peer`, or refuses it (counted and logged, rate
  // limited). When it comes with `evict`, the transport closes that
  // connection; its ticket is already removed.
  Decision admit(const Peer& peer);
  void remove(const Ticket& t);
  // Connections idle past the timeout; their tickets are removed.
  std::vector<std::uint64_t> expired();
  std::size_t size();

 private:
  void note(const char* what, const Peer& peer, const std::string& why);
  std::map<std::uint64_t, std::shared_ptr<Ticket>>::iterator evictee_locked();  // mu_ held; tickets_ not empty

  std::string transport_;
  AdmissionLimits limits_;
  metrics::Counter& refused_limit_;
  metrics::Counter& refused_address_;
  metrics::Counter& evicted_;
  metrics::Counter& idle_closed_;
  std::mutex mu_;  // guards everything below
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::shared_ptr<Ticket>> tickets_;
  std::map<std::array<std::uint8_t, 16>, std::size_t> per_address_;
  Clock::time_point last_logged_{};
  std::size_t unlogged_ = 0;
};

}  // namespace nfsrdma::rpc
