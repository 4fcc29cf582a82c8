#include "lib/transport/rdma/progress_loop.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/transport/rdma/server_connection.hpp"

namespace nfsrdma::rdma {

namespace {
constexpr std::int64_t kTimersNs = 200'000'000;  // every connection's timers, at least this often
constexpr int kSleepMs = 200;

constexpr const char* kPollsHelp =
    "Idle spells with no call in progress that an event loop polled through its RPC-RDMA connections, by how they ended";
metrics::Counter& polls(bool found_work) {
  static metrics::Counter& work = metrics::registry().counter(
      "nfsrdma_server_rdma_polls_total", kPollsHelp, {{"result", "work"}});
  static metrics::Counter& slept = metrics::registry().counter(
      "nfsrdma_server_rdma_polls_total", kPollsHelp, {{"result", "slept"}});
  return found_work ? work : slept;
}
}  // namespace

ProgressLoop::ProgressLoop(RdmaServer& server, std::shared_ptr<EventLoop> loop, int index)
    : server_(server), loop_(std::move(loop)), index_(index) {
  loop_->attach(*this);
}

void ProgressLoop::add(std::shared_ptr<ServerConnection> conn) {
  conn->loop_ = shared_from_this();
  loop_->add_load(1);
  inbox_.post(std::move(conn));
}

void ProgressLoop::wake() { loop_->waker().wake(); }

void ProgressLoop::take_added() {
  inbox_.take(added_);
  for (auto& c : added_) {
    const int fd = c->ep_->wait_fd();
    if (!loop_->watch(*this, fd, EPOLLIN, static_cast<std::uint64_t>(fd))) {
      spdlog::warn("rdma: cannot wait for the connection from {}: {}", c->peer().describe(), std::strerror(errno));
      c->close();
    } else {
      if (by_fd_.size() <= static_cast<std::size_t>(fd)) by_fd_.resize(fd + 1, nullptr);
      by_fd_[fd] = c.get();
    }
    spdlog::debug("rdma: connection from {} on event loop {}", c->peer().describe(), index_);
    c->hot_ = true;  // the client may have sent already
    conns_.push_back(std::move(c));
  }
}

bool ProgressLoop::turn(std::int64_t now) {
  take_added();
  const bool stopping = server_.stopping_.load();
  const bool timers_due = stopping || now - timers_ns_ >= kTimersNs;
  if (timers_due) timers_ns_ = now;
  const bool hot = turn_all(timers_due);
  if (hot) {
    if (polls_) stop_polling(true);
    idle_ = false;
    busy_ns_ = steady_ns();
  }
  if (stopping && !drained_ && conns_.empty() && inbox_.empty()) {
    if (polls_) stop_polling(false);
    drained_ = true;
  }
  return hot;
}

void ProgressLoop::on_event(std::uint64_t fd, std::uint32_t) {
  if (fd < by_fd_.size() && by_fd_[fd]) by_fd_[fd]->hot_ = true;
}

int ProgressLoop::sleep_ms() const { return kSleepMs; }

void ProgressLoop::retired() { server_.part_drained(); }

bool ProgressLoop::poll_idle() {
  if (!idle_) spell();
  idle_ = true;
  if (!polling(busy_ns_)) return false;
  for (auto& c : conns_) c->hot_ = true;
  return true;
}

bool ProgressLoop::turn_all(bool timers_due) {
  bool hot = false;
  for (std::size_t i = 0; i < conns_.size();) {
    ServerConnection& c = *conns_[i];
    if (c.hot_ || timers_due || c.has_inbox()) {
      c.armed_ = false;
      c.hot_ = c.turn(timers_due);
    }
    if (!c.ended()) {
      hot = hot || c.hot_;
      ++i;
      continue;
    }
    // Only what its watch added: one that failed (EEXIST) must not take
    // another connection's descriptor out of the loop's set.
    const auto fd = static_cast<std::size_t>(c.ep_->wait_fd());
    if (fd < by_fd_.size() && by_fd_[fd] == &c) {
      loop_->unwatch(static_cast<int>(fd));
      by_fd_[fd] = nullptr;
    }
    c.finish();
    std::swap(conns_[i], conns_.back());
    conns_.pop_back();
    loop_->add_load(-1);
  }
  return hot;
}

// ORDER: the loop calls this after its waker's sleep_begin(), behind a
// seq_cst fence; ServerConnection::post() pushes, then wakes the loop
// through the waker (see LoopInbox): a request posted meanwhile is either
// seen here or wakes it.
bool ProgressLoop::arm() {
  if (!inbox_.empty()) return false;  // a connection added
  for (auto& c : conns_) {
    if (c->has_inbox() || c->ended()) return false;
    if (c->armed_) continue;
    if (!c->ep_->try_wait()) {
      c->hot_ = true;
      return false;
    }
    c->armed_ = true;
  }
  return true;
}

// Waking a sleeping thread costs about what a call takes at queue depth 1, so
// while the server has at most one call in flight (one client, waiting for
// each reply; the credits_in_use gauge, over every connection), a loop busy
// within poll_time polls rather than sleeps, in the idle spells it polls
// through (spell()). With more in flight the loops are kept busy anyway, and
// a poller would take a core from them (4 connections at depth 8 on 2 cores:
// 0.87x IOPS).
bool ProgressLoop::polling(std::int64_t busy_ns) {
  const std::int64_t window = std::chrono::nanoseconds(server_.options_.poll_time).count();
  const bool want =
      spell_polls_ && window > 0 && connection_metrics().in_use.value() <= 1 && steady_ns() - busy_ns < window;
  if (want == polls_) return polls_;
  if (!want) {
    stop_polling(false);  // the window passed: the loop goes to sleep
    return false;
  }
  static const int cap = static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  if (server_.pollers_.fetch_add(1) >= cap) {
    server_.pollers_.fetch_sub(1);
    return false;
  }
  return polls_ = true;
}

// The rule is PollScore's (poll_score.hpp), but for a spell that begins with
// a call of this loop's connections at a worker: that is slept through,
// since the worker's reply wakes the loop (wake()). Polling for it made an
// nfsrdma-fuse mount's `tar -x`, whose SETATTRs and CREATEs go to workers
// one at a time, 1.12x slower.
void ProgressLoop::spell() {
  const bool at_worker = std::any_of(conns_.begin(), conns_.end(), [](const auto& c) { return c->at_worker(); });
  spell_polls_ = !at_worker && score_.begin(connection_metrics().in_use.value() != 0);
}

void ProgressLoop::stop_polling(bool found_work) {
  server_.pollers_.fetch_sub(1);
  polls_ = false;
  if (score_.end(found_work)) polls(found_work).inc();
  spell_polls_ = false;
}

}  // namespace nfsrdma::rdma
