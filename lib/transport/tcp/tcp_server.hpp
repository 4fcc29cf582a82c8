// The server side of RPC over TCP: listeners, connections, record marking, and
// replies written back from any thread.
//
// Theory of operation: one event-loop thread (run()) owns the epoll set. It
// accepts, reads records and hands each to the CallHandler, which must not block
// (the server posts it to its worker pool). Replies come back through the
// connection's ReplyChannel from any thread: send() writes directly when nothing
// is queued, and queues the rest and arms EPOLLOUT when the socket is full.
// Each connection has at most max_calls_in_flight calls handed out; at that
// limit the loop stops reading it until replies drain (backpressure, not a
// buffer that grows). Teardown: stop_intake() stops accepting and reading;
// stop() ends run() once queued replies are written (or after a grace period).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/rpc/transport.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {

struct TcpServerOptions {
  std::size_t max_record_bytes = (1u << 20) + 64 * 1024;  // 1 MiB of data plus headers
  std::size_t max_connections = 1024;
  std::size_t max_calls_in_flight = 128;  // per connection
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
  void wake();

  TcpServerOptions options_;
  rpc::CallHandler handler_;
  Fd epoll_;
  Fd wake_fd_;
  std::vector<Listener> listeners_;
  std::map<int, std::shared_ptr<TcpConnection>> connections_;  // loop thread only
  std::atomic<std::size_t> connection_count_{0};
  std::atomic<bool> intake_stopped_{false};
  std::atomic<bool> stopping_{false};
  bool intake_applied_ = false;  // loop thread only
};

}  // namespace nfsrdma::tcp
