// A thread that progresses a group of RdmaServer's connections: their
// completion queues, inboxes and requests (server_connection.hpp). The server
// runs one per core (RdmaServerOptions::progress_threads) and gives each new
// connection to the one with the fewest; the connection stays there until it
// ends, so nothing of a connection is shared between loops.
//
// Theory of operation: a connection is hot while it has work (completions,
// requests back in its inbox); the loop turns its hot connections in rounds,
// each turn taking at most one batch of completions, so one busy client
// cannot starve the others. With none hot, the loop polls for a while when
// the server is nearly idle (RdmaServerOptions::poll_time) and polling has
// been finding work (spell()), else it arms every connection it turned
// since it last slept (Endpoint::try_wait) and sleeps in epoll over their
// completion queues' descriptors and its inbox's eventfd (LoopInbox, as the
// TCP event loops'), which wake() writes. Whatever epoll reports turns hot.
// Every connection is turned at least every 200 ms for its timers (peer gone, RMA
// deadline). A connection that closes is drained and dropped on the loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "lib/base/loop_inbox.hpp"
#include "lib/transport/rdma/poll_score.hpp"

namespace nfsrdma::rdma {

class RdmaServer;
class ServerConnection;

class ProgressLoop : public std::enable_shared_from_this<ProgressLoop> {
 public:
  ProgressLoop(RdmaServer& server, int index);
  ~ProgressLoop();
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  void start();
  // Ends the thread once every connection is drained (the server is stopping).
  void join();
  // From the acceptor: the loop owns the connection from now on (which
  // keeps the loop, for wake(), as long as a worker keeps it).
  void add(std::shared_ptr<ServerConnection> conn);
  // Connections given and not yet ended: where the next one goes.
  std::size_t load() const { return load_.load(std::memory_order_relaxed); }
  // Thread-safe: a sleeping loop looks at its connections again.
  void wake();

 private:
  void run();
  void take_added();
  bool turn_all(bool timers_due);  // true: a connection still has work
  bool arm();  // false: a connection had work after all
  void sleep();
  bool polling(std::int64_t busy_ns);
  void spell();  // the loop turned idle: does it poll through this spell?
  void stop_polling(bool found_work);  // a spell it polled through ended

  RdmaServer& server_;
  const int index_;
  int epoll_fd_ = -1;
  LoopInbox<std::shared_ptr<ServerConnection>> inbox_;  // connections added
  std::thread thread_;
  std::atomic<std::size_t> load_{0};
  bool polls_ = false;  // holds one of RdmaServer::pollers_
  bool spell_polls_ = false;  // this idle spell is polled through (spell())
  PollScore score_;
  // Loop thread only.
  std::vector<std::shared_ptr<ServerConnection>> added_;  // inbox_'s last take
  std::vector<std::shared_ptr<ServerConnection>> conns_;
};

}  // namespace nfsrdma::rdma
