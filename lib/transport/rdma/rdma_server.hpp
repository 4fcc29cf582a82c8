// The server side of RPC-over-RDMA v1 (RFC 8166) over libfabric: accepts
// connections, keeps a posted receive for every credit it grants, pulls Read
// chunks with RDMA Read, hands RPC calls to the same CallHandler the TCP
// transport feeds (a Read chunk's data stays in the payload buffer it was read
// into: IncomingCall::placed), and returns replies inline, through the
// client's Write chunk (RDMA Write, then the Send) or through its Reply chunk.
//
// Theory of operation, per call (one Request per credit granted, and a few
// more; a connection's grant starts at 8 and doubles with use to `credits`):
//   received -> [pulling: RDMA Reads of the Read chunk] -> executing (in the
//   handler: on the connection's event loop, or a worker it hands the call
//   to) -> [pushing: RDMA Writes into the Write or Reply chunk] -> sent. One
//   function on the connection's event loop moves a request on
//   (ServerConnection::advance, states in server_connection.hpp); a worker's
//   reply and a payload buffer given back by another thread return to it
//   through a lock-free inbox, so only that thread touches the connection's
//   endpoint, queues and requests. Each of the server's event loops (one per
//   core, shared with TCP) serves a group of connections through the
//   server's part of it (ProgressLoop). A call whose data
//   fits small_payload_bytes uses its request's own registered buffer; a
//   larger one leases a buffer from the device's pool, and running out of
//   those is a wait (PayloadPool), not an error, as is a full send queue
//   (counted per connection; see ServerConnection::post_rma). On verbs, whose RC
//   queue pairs order a Send after the RDMA Writes before it, a reply's
//   Writes are unsignalled and its Send is posted right behind them; the
//   Send's completion then covers both. Elsewhere (the tcp provider, where a
//   Write completes locally) the Send waits for the Writes' completions, so
//   the data is in place before the client sees it.
// A request (and its credit) is held until its reply's Send completed, so a
// client that never takes its replies holds at most its requests, their
// fixed buffers and send slots; no worker ever waits for a send slot. A few
// requests beyond the credits absorb a client that reuses a credit before
// the server saw its reply's completion; more than that closes the
// connection. Connections are admitted, evicted and closed when idle by
// rpc::Admission, as over TCP (activity: any completion).
// Bad input: a wrong version gets RDMA_ERROR/ERR_VERS, an unparseable or
// invalid header ERR_CHUNK (echoing the xid). Never a truncated reply.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/base/event_loop.hpp"
#include "lib/rpc/admission.hpp"
#include "lib/rpc/budget.hpp"
#include "lib/rpc/transport.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "lib/transport/rdma/buffers.hpp"

namespace nfsrdma::rdma {

struct RdmaServerOptions {
  std::string provider;  // empty: verbs if present, else tcp
  std::string host;      // empty: every address
  std::uint16_t port = 20049;
  std::uint32_t credits = 128;
  std::uint32_t inline_bytes = rpcrdma::kDefaultInline;  // largest message we receive (and offer to send) inline
  std::size_t payload_slots = 64;           // registered payload buffers, per device; a quarter per connection
  std::size_t payload_bytes = (1u << 20) + 64 * 1024;
  // Every request's own payload buffer, registered with its connection: a
  // call moving at most this much (4 and 8 KiB I/O) never waits for one.
  std::size_t small_payload_bytes = 8 * 1024;
  rpc::AdmissionLimits admission;
  std::chrono::milliseconds rma_timeout{10000};  // an RMA the peer never serves closes its connection
  // While the server has at most one call in flight, an event loop polls
  // its connections this long after its last activity before it sleeps;
  // zero: always sleep.
  std::chrono::microseconds poll_time{50};
  // The event loops to run on (started and stopped by their owner, shared
  // with TCP); empty: the server makes and runs `loops` of its own (0: one
  // per core, threads rdma-loop-N).
  std::vector<std::shared_ptr<EventLoop>> event_loops;
  unsigned loops = 0;
  // Entries of each connection's send queue; 0: the provider's (1024 asked).
  std::size_t send_queue_depth = 0;
  // What connections and payload pools are charged to; null: a budget of
  // the server's own, of MemoryBudget::default_limit().
  rpc::MemoryBudget* budget = nullptr;
};

class ServerConnection;
class ProgressLoop;

class RdmaServer {
 public:
  static Result<std::unique_ptr<RdmaServer>> start(const RdmaServerOptions& options, rpc::CallHandler handler);
  ~RdmaServer();

  std::uint16_t port() const { return port_; }
  const std::string& provider() const { return provider_; }
  std::size_t connection_count();
  // Any thread, for a debugging session (the metrics endpoint's /debug/rdma):
  // each connection's last `per_connection` (at most 256) request state
  // changes, as text, and each request not free at its latest change.
  std::string trace(std::size_t per_connection);
  // Stops accepting and closes every connection; calls still executing reply into the void.
  void stop();

 private:
  friend class ServerConnection;
  friend class ProgressLoop;
  RdmaServer() = default;
  void accept_loop();
  void reap();
  void part_drained() { drained_.one(); }  // a ProgressLoop's connections are all drained (stopping)
  void close_connections(const std::vector<std::uint64_t>& tickets);
  // The domain of the device a request arrived on, and that device's payload
  // buffers (made with the first connection on it); acceptor thread only.
  Result<std::pair<fabric::Domain*, PayloadPool*>> device_for(const fabric::ConnectRequest& req);

  RdmaServerOptions options_;
  rpc::CallHandler handler_;
  std::string provider_;
  std::uint16_t port_ = 0;
  std::unique_ptr<fabric::Listener> listener_;
  std::unique_ptr<rpc::Admission> admission_;
  std::unique_ptr<rpc::MemoryBudget> own_budget_;
  rpc::MemoryBudget* budget_ = nullptr;
  std::size_t payload_charged_ = 0;  // the payload pools' bytes, charged to budget_
  // ORDER: after listener_, so each pool is deregistered before its domain closes.
  std::map<const fabric::Domain*, std::unique_ptr<PayloadPool>> payloads_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> pollers_{0};  // loops polling now (ProgressLoop::polling)
  std::vector<std::shared_ptr<EventLoop>> own_loops_;
  std::vector<std::shared_ptr<ProgressLoop>> loops_;  // this server's part of each loop
  RetiredParts drained_;
  std::thread acceptor_;
  std::mutex mu_;  // guards connections_
  std::list<std::shared_ptr<ServerConnection>> connections_;
};

}  // namespace nfsrdma::rdma
