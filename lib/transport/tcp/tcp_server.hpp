// The server side of RPC over TCP: listeners, connections, record marking, and
// replies written back from any thread.
//
// Theory of operation: one event-loop thread (run()) owns the epoll set. It
// accepts (through rpc::Admission), reads records and hands each to the
// CallHandler, which must not block (the server runs calls that cannot
// block there, and posts the rest to its worker pool).
// Each call gets its own ReplyChannel; its reply comes back from any thread:
// send() writes directly when nothing is queued, and queues the rest and arms
// EPOLLOUT when the socket is full.
//
// What one connection may hold is bounded, from a call's arrival until its
// reply has left the socket: at most max_calls_in_flight calls, and at most
// max_connection_bytes of memory, counted as each call's bytes plus the most
// its reply can take (reply_bound) until the reply exists, then the reply's
// own bytes until the socket took them. At either limit the loop stops
// reading the connection (back-pressure: the client's sends block), so a
// client that never reads its replies holds a bounded amount and nothing
// grows. Records are parsed as they arrive (RecordReader); bytes already
// received when reading stops are parsed once it resumes. The same bytes, and
// partial records, are charged to the server's rpc::MemoryBudget; a
// connection reads on only while the budget, and its address's share, have
// room for the most one step can add (a record and its reply's bound), so the
// sum over every connection stays under the budget too. One stopped for the
// budget reads again when memory is released.
//
// Teardown: stop_intake() stops accepting and reading; stop() ends run() once
// queued replies are written (or after a grace period).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "lib/rpc/admission.hpp"
#include "lib/rpc/budget.hpp"
#include "lib/rpc/transport.hpp"
#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {

struct TcpServerOptions {
  std::size_t max_record_bytes = (1u << 20) + 64 * 1024;  // 1 MiB of data plus headers
  rpc::AdmissionLimits admission;
  std::size_t max_calls_in_flight = 128;               // per connection
  std::size_t max_connection_bytes = 16u << 20;        // per connection, see above
  std::size_t kept_buffers = 16;                       // large buffers kept for reuse (BufferShelf)
  // The most a call's reply can take, from the call's bytes; unset: a whole
  // record (max_record_bytes), the safe and pessimistic answer.
  std::function<std::size_t(std::span<const std::uint8_t> call)> reply_bound;
  // What connections are charged to; null: a budget of the server's own, of
  // MemoryBudget::default_limit().
  rpc::MemoryBudget* budget = nullptr;
};

class TcpConnection;

class TcpServer {
 public:
  TcpServer(TcpServerOptions options, rpc::CallHandler handler);
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // Listens on host:port (port 0: any free port); calls from it carry `tag`.
  // Returns the bound port.
  Result<std::uint16_t> add_listener(const std::string& host, std::uint16_t port, int tag);

  void run();
  void stop_intake();  // thread-safe
  void stop();         // thread-safe

  std::size_t connection_count() const { return connection_count_.load(); }

 private:
  friend class TcpConnection;
  struct Listener {
    Fd fd;
    int tag;
  };

  void accept_from(Listener& l);
  void on_readable(const std::shared_ptr<TcpConnection>& c);
  void close_connection(int fd);
  void close_expired();
  void wake();
  // A connection that stopped reading with bytes already received: the loop
  // parses them when it may read again (thread-safe).
  void resume(int fd);
  // Whether the budget has room for one more step of the connection `fd`
  // from `addr`; if not, `fd` is resumed once memory is released (thread-safe).
  bool budget_allows(int fd, const rpc::Address& addr);
  void on_budget_room();

  TcpServerOptions options_;
  BufferShelf shelf_{options_.kept_buffers};  // ORDER: before the connections that give to it
  rpc::CallHandler handler_;
  rpc::Admission admission_;
  std::unique_ptr<rpc::MemoryBudget> own_budget_;
  rpc::MemoryBudget* budget_;
  std::size_t waker_;       // budget_->on_room's
  std::size_t step_bytes_;  // the most one step of a connection adds: a record and its reply's bound
  Fd epoll_;
  Fd wake_fd_;
  std::vector<Listener> listeners_;
  std::map<int, std::shared_ptr<TcpConnection>> connections_;  // loop thread only
  std::map<std::uint64_t, int> by_ticket_;                     // loop thread only: admission ticket -> fd
  std::atomic<std::size_t> connection_count_{0};
  std::atomic<bool> intake_stopped_{false};
  std::atomic<bool> stopping_{false};
  bool intake_applied_ = false;  // loop thread only
  std::mutex resume_mu_;         // guards resume_ and budget_waiting_
  std::vector<int> resume_;
  std::vector<int> budget_waiting_;
};

}  // namespace nfsrdma::tcp
