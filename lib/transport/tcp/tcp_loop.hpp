// TcpServer's part of one event loop (tcp_server.hpp, lib/base/event_loop.hpp):
// its share of the connections, whose records it reads and whose calls it
// hands out on the loop's thread, and whose queued replies it writes when
// their sockets take them. A connection is the part's from adopt() until it
// ends; its replies may come from any thread. Other threads hand it work
// through its LoopInbox, as the RDMA acceptor hands the RDMA part its
// connections.
// Internal to lib/transport/tcp.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/base/event_loop.hpp"
#include "lib/base/loop_inbox.hpp"
#include "lib/rpc/admission.hpp"
#include "lib/rpc/budget.hpp"
#include "lib/transport/tcp/socket.hpp"
#include "lib/transport/tcp/tcp_server.hpp"

namespace nfsrdma::tcp {

class TcpServer;
class TcpConnection;

class TcpLoop final : public LoopPart {
 public:
  TcpLoop(TcpServer& server, EventLoop& loop, unsigned index);
  ~TcpLoop() override;  // releases what it still has; retired, or its loop's thread ended
  TcpLoop(const TcpLoop&) = delete;
  TcpLoop& operator=(const TcpLoop&) = delete;

  // ---- the loop's thread (LoopPart) ----
  bool turn(std::int64_t now) override;
  void on_event(std::uint64_t fd, std::uint32_t events) override;
  bool arm() override { return inbox_.empty(); }
  int sleep_ms() const override { return server_.stopping_ ? 50 : 1000; }
  bool finished() override;
  void retired() override { server_.part_retired(); }

  // Thread-safe: events on `fd` (a connection's socket, a listener) come
  // to this part.
  bool watch(int fd, std::uint32_t events) { return loop_.watch(*this, fd, events, static_cast<std::uint64_t>(fd)); }
  void rewatch(int fd, std::uint32_t events) { loop_.rewatch(*this, fd, events, static_cast<std::uint64_t>(fd)); }
  void unwatch(int fd) { loop_.unwatch(fd); }
  // Connections of both transports on its loop: where the next one goes.
  std::size_t load() const { return loop_.load(); }

  // ---- thread-safe ----
  // From loop 0's accept: the loop takes the connection over.
  void adopt(Fd fd, const rpc::Peer& peer, int tag, std::shared_ptr<rpc::Admission::Ticket> ticket);
  // Closes the connection holding admission ticket `id`, if this loop has
  // it; `why` is for the log.
  void close_ticket(std::uint64_t id, const char* why);
  // The loop looks at the server's flags (stopping, intake) at once.
  void wake();
  bool on_loop_thread() const { return loop_.on_loop_thread(); }
  // A connection that stopped reading with bytes already received: the loop
  // parses them when it may read again.
  void resume(int fd);
  // Whether the budget has room for one more step of the connection `fd`
  // from `addr`; if not, `fd` is resumed once memory is released.
  bool budget_allows(int fd, const rpc::Address& addr);
  void on_budget_room();

 private:
  // What other threads hand the loop.
  struct Posted {
    enum class Kind { adopt, close, resume } kind;
    std::shared_ptr<TcpConnection> conn;  // adopt
    std::uint64_t ticket = 0;             // close: the connection holding it
    const char* why = nullptr;            // close: for the log
    int fd = -1;                          // resume
  };
  void take_posted();  // adopted connections, tickets to close, connections to resume
  void on_readable(const std::shared_ptr<TcpConnection>& c);
  void close_connection(int fd);
  void drop_all();  // what the loop still has, at its end

  TcpServer& server_;
  EventLoop& loop_;
  const unsigned index_;
  LoopInbox<Posted> inbox_{loop_.waker()};
  std::mutex budget_mu_;             // guards budget_waiting_
  std::vector<int> budget_waiting_;  // connections resumed when the budget has room
  // Loop thread only.
  std::vector<Posted> posted_;  // inbox_'s last take: keeps its room, as a busy connection is resumed often
  std::map<int, std::shared_ptr<TcpConnection>> connections_;
  bool intake_applied_ = false;
  std::int64_t stop_deadline_ = 0;  // steady_ns() by when queued replies are given up on
  std::int64_t next_expiry_ = 0;    // loop 0: when idle connections are looked at next
  bool dropped_ = false;            // finished: what it had is released
};

}  // namespace nfsrdma::tcp
