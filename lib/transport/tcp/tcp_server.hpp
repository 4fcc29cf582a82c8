// The server side of RPC over TCP: listeners, connections, record marking, and
// replies written back from any thread.
//
// Theory of operation: the server's event loops (lib/base/event_loop.hpp),
// one per core, shared with RPC-RDMA, each turn a share of the connections
// (the server's part of each loop: TcpLoop, tcp_loop.hpp). Loop 0 also
// accepts (through rpc::Admission) and gives each new connection to the loop
// whose part has the fewest, where it stays. A loop reads records and hands each to the
// CallHandler, which must not block (the server runs calls that cannot block
// there, and posts the rest to its worker pool).
// Each call gets its own ReplyChannel; its reply comes back from any thread:
// send() writes directly when nothing is queued, and queues the rest and arms
// EPOLLOUT when the socket is full. The replies the loop itself makes for the
// calls of one received batch (the inline ones) wait for the batch's end and
// leave in one sendmsg.
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
// partial records, are charged to the server's rpc::MemoryBudget; each read
// step of a connection (a record handed out, or one recv) is charged first
// with the most it can add (a record and its reply's bound) and draws what
// it adds from that, so loops stepping at once stay under the budget and its
// address's share together. One stopped for the budget reads again when
// memory is released.
//
// Teardown: stop_intake() stops accepting and reading; stop() ends run() once
// queued replies are written (or after a grace period).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "lib/base/event_loop.hpp"
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
  std::size_t kept_small_buffers = 512;                // and small ones: at most 8 MiB of them
  // The event loops to run on (started and stopped by their owner, shared
  // with RPC-RDMA); empty: the server makes `loops` of its own (0: one per
  // core, threads tcp-loop-N) and run() runs them.
  std::vector<std::shared_ptr<EventLoop>> event_loops;
  unsigned loops = 0;
  // The most a call's reply can take, from the call's bytes; unset: a whole
  // record (max_record_bytes), the safe and pessimistic answer.
  std::function<std::size_t(std::span<const std::uint8_t> call)> reply_bound;
  // What connections are charged to; null: a budget of the server's own, of
  // MemoryBudget::default_limit().
  rpc::MemoryBudget* budget = nullptr;
};

class TcpLoop;

class TcpServer {
 public:
  TcpServer(TcpServerOptions options, rpc::CallHandler handler);
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // Before serve(): listens on host:port (port 0: any free port); calls
  // from it carry `tag`. Returns the bound port. Nothing is accepted before
  // serve().
  Result<std::uint16_t> add_listener(const std::string& host, std::uint16_t port, int tag);

  // On loops given: accepts from now on (their owner runs them).
  void serve();
  // On loops of its own: serve(), and runs them until stop().
  void run();
  void stop_intake();  // thread-safe
  void stop();         // thread-safe

  std::size_t connection_count() const { return connection_count_.load(); }

 private:
  friend class TcpLoop;
  friend class TcpConnection;
  struct Listener {
    Fd fd;
    int tag;
  };

  // Loop 0: accepts what `fd` has waiting, if it is a listener.
  bool accept_from(int fd);
  void drop_listeners(TcpLoop& loop);
  void part_retired() { retired_.one(); }  // a loop is done with its TcpLoop (TcpLoop::retired)
  // Loop 0, every second: closes the connections idle past their timeout.
  void close_expired();
  void close_ticket(std::uint64_t id, const char* why);  // on whichever loop has it

  TcpServerOptions options_;
  BufferShelf shelf_{options_.kept_buffers, options_.kept_small_buffers};  // ORDER: before the connections that give to it
  // Each call's ReplyChannel, freed from any thread: its memory is kept for the next.
  std::pmr::synchronized_pool_resource channels_;  // ORDER: before the connections
  // For READ data spliced from the page cache (rpc::ReplyMessage::pipe): 1
  // MiB at any offset fits one; 64 lent at once, then replies copy.
  PipePool pipes_{64, 2 << 20};  // ORDER: before the connections whose replies hold them
  rpc::CallHandler handler_;
  rpc::Admission admission_;
  std::unique_ptr<rpc::MemoryBudget> own_budget_;
  rpc::MemoryBudget* budget_;
  std::size_t step_bytes_;  // the most one step of a connection adds: a record and its reply's bound
  std::mutex listeners_mu_;           // serve() against drop_listeners()
  std::vector<Listener> listeners_;  // changed before serve(), then by loop 0 only
  std::atomic<std::size_t> connection_count_{0};
  std::atomic<bool> intake_stopped_{false};
  std::atomic<bool> stopping_{false};
  std::vector<std::shared_ptr<EventLoop>> own_loops_;  // ORDER: before the parts on them, which they outlive
  std::vector<std::unique_ptr<TcpLoop>> loops_;  // ORDER: after what their connections use
  RetiredParts retired_;
  std::size_t waker_;                            // budget_->on_room's, which wakes the loops
};

}  // namespace nfsrdma::tcp
