// One of TcpServer's event loops (tcp_server.hpp): a thread that owns an
// epoll set over its share of the connections, reads their records, hands
// the calls out, and writes what replies left queued. A connection is the
// loop's from adopt() until it ends; its replies may come from any thread.
// Other threads hand the loop work through its LoopInbox, as the RDMA
// progress loops' acceptor does.
// Internal to lib/transport/tcp.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "lib/base/loop_inbox.hpp"
#include "lib/rpc/admission.hpp"
#include "lib/rpc/budget.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {

class TcpServer;
class TcpConnection;

class TcpLoop {
 public:
  TcpLoop(TcpServer& server, unsigned index);
  ~TcpLoop();  // releases what it still has; the thread has ended
  TcpLoop(const TcpLoop&) = delete;
  TcpLoop& operator=(const TcpLoop&) = delete;

  void start();
  void join();
  int epoll_fd() const { return epoll_.get(); }
  // Connections given and not yet ended: where the next one goes.
  std::size_t load() const { return load_.load(std::memory_order_relaxed); }

  // ---- thread-safe ----
  // From loop 0's accept: the loop takes the connection over.
  void adopt(Fd fd, const rpc::Peer& peer, int tag, std::shared_ptr<rpc::Admission::Ticket> ticket);
  // Closes the connection holding admission ticket `id`, if this loop has
  // it; `why` is for the log.
  void close_ticket(std::uint64_t id, const char* why);
  // The loop looks at the server's flags (stopping, intake) at once.
  void wake();
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
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
  void run();
  void take_posted();  // adopted connections, tickets to close, connections to resume
  void on_readable(const std::shared_ptr<TcpConnection>& c);
  void close_connection(int fd);
  void drop_all();  // what the loop still has, at its end

  TcpServer& server_;
  const unsigned index_;
  Fd epoll_;
  LoopInbox<Posted> inbox_;
  std::thread thread_;
  std::atomic<std::size_t> load_{0};
  std::mutex budget_mu_;             // guards budget_waiting_
  std::vector<int> budget_waiting_;  // connections resumed when the budget has room
  // Loop thread only.
  std::vector<Posted> posted_;  // inbox_'s last take: keeps its room, as a busy connection is resumed often
  std::map<int, std::shared_ptr<TcpConnection>> connections_;
  bool intake_applied_ = false;
};

}  // namespace nfsrdma::tcp
