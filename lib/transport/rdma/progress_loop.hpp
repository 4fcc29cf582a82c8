// RdmaServer's part of one event loop (lib/base/event_loop.hpp): a group of
// its connections, whose completion queues, inboxes and requests it moves on
// the loop's thread. The server puts one on each of its loops (one per core,
// shared with TCP) and gives each new connection to the one with the
// fewest; the connection stays there until it ends, so nothing of a
// connection is shared between loops.
//
// Theory of operation: a connection is hot while it has work (completions,
// requests back in its inbox); each turn of the loop turns the hot
// connections once, taking at most one batch of completions each, so one
// busy client cannot starve the others. With none hot, the part asks the
// loop to poll for a while when the server is nearly idle
// (RdmaServerOptions::poll_time) and polling has been finding work
// (spell()); else, as the loop sleeps, it arms every connection it turned
// since it last slept (Endpoint::try_wait), whose completion queues'
// descriptors the loop watches, and the loop's waker wakes it for a
// connection added or a request back in an inbox (wake()). Whatever epoll
// reports turns hot. Every connection is turned at least every 200 ms for
// its timers (peer gone, RMA deadline). A connection that closes is drained
// and dropped on the loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/base/event_loop.hpp"
#include "lib/base/loop_inbox.hpp"
#include "lib/transport/rdma/poll_score.hpp"

namespace nfsrdma::rdma {

class RdmaServer;
class ServerConnection;

class ProgressLoop final : public LoopPart, public std::enable_shared_from_this<ProgressLoop> {
 public:
  // Attaches itself to `loop`, which it keeps for wake().
  ProgressLoop(RdmaServer& server, std::shared_ptr<EventLoop> loop, int index);
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  // ---- the loop's thread (LoopPart) ----
  bool turn(std::int64_t now) override;
  void on_event(std::uint64_t fd, std::uint32_t events) override;
  bool poll_idle() override;
  bool arm() override;  // false: a connection had work after all
  int sleep_ms() const override;
  // The server is stopping and every connection is drained.
  bool finished() override { return drained_; }
  void retired() override;  // tells the server

  // From the acceptor: the part owns the connection from now on (which
  // keeps the part and its loop, for wake(), as long as a worker keeps it).
  void add(std::shared_ptr<ServerConnection> conn);
  // Connections of both transports on its loop: where the next one goes.
  std::size_t load() const { return loop_->load(); }
  // Thread-safe: a sleeping loop looks at its connections again.
  void wake();
  // Whether it sleeps or not: for the server's stopping flag.
  void wake_now() { loop_->waker().wake_now(); }

 private:
  void take_added();
  bool turn_all(bool timers_due);  // true: a connection still has work
  bool polling(std::int64_t busy_ns);
  void spell();  // the loop turned idle: does it poll through this spell?
  void stop_polling(bool found_work);  // a spell it polled through ended

  RdmaServer& server_;
  const std::shared_ptr<EventLoop> loop_;
  const int index_;
  LoopInbox<std::shared_ptr<ServerConnection>> inbox_{loop_->waker()};  // connections added
  bool polls_ = false;  // holds one of RdmaServer::pollers_
  bool spell_polls_ = false;  // this idle spell is polled through (spell())
  PollScore score_;
  // Loop thread only.
  std::int64_t busy_ns_ = 0;    // when a connection last had work
  std::int64_t timers_ns_ = 0;  // when every connection was last turned
  bool idle_ = false;           // no connection had work since busy_ns_
  bool drained_ = false;
  std::vector<std::shared_ptr<ServerConnection>> added_;  // inbox_'s last take
  std::vector<std::shared_ptr<ServerConnection>> conns_;
  std::vector<ServerConnection*> by_fd_;  // conns_ by the wait descriptor they are watched by
};

}  // namespace nfsrdma::rdma
