#include "lib/transport/rdma/progress_loop.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
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
    "Idle spells with no call in progress that a progress thread polled through, by how they ended";
metrics::Counter& polls(bool found_work) {
  static metrics::Counter& work = metrics::registry().counter(
      "nfsrdma_server_rdma_polls_total", kPollsHelp, {{"result", "work"}});
  static metrics::Counter& slept = metrics::registry().counter(
      "nfsrdma_server_rdma_polls_total", kPollsHelp, {{"result", "slept"}});
  return found_work ? work : slept;
}
}  // namespace

ProgressLoop::ProgressLoop(RdmaServer& server, int index) : server_(server), index_(index) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    spdlog::critical("rdma: cannot make a progress loop: {}", std::strerror(errno));
    std::abort();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the inbox; a connection's descriptor carries the connection
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, inbox_.fd(), &ev) != 0) {
    spdlog::critical("rdma: cannot make a progress loop: {}", std::strerror(errno));
    std::abort();
  }
}

ProgressLoop::~ProgressLoop() {
  join();
  close(epoll_fd_);
}

void ProgressLoop::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), ("rdma-loop-" + std::to_string(index_)).c_str());  // for top -H, and tests
    run();
  });
}

void ProgressLoop::join() {
  if (!thread_.joinable()) return;
  inbox_.wake_now();  // the server is stopping: a flag read before sleep_begin
  thread_.join();
}

void ProgressLoop::add(std::shared_ptr<ServerConnection> conn) {
  conn->loop_ = shared_from_this();
  load_.fetch_add(1, std::memory_order_relaxed);
  inbox_.post(std::move(conn));
}

void ProgressLoop::wake() { inbox_.wake(); }

void ProgressLoop::take_added() {
  inbox_.take(added_);
  for (auto& c : added_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->ep_->wait_fd(), &ev) != 0) {
      spdlog::warn("rdma: cannot wait for the connection from {}: {}", c->peer().describe(), std::strerror(errno));
      c->close();
    }
    spdlog::debug("rdma: connection from {} on progress loop {}", c->peer().describe(), index_);
    c->hot_ = true;  // the client may have sent already
    conns_.push_back(std::move(c));
  }
}

void ProgressLoop::run() {
  std::int64_t busy_ns = 0, timers_ns = 0;
  bool idle = false;  // no connection had work since busy_ns
  for (;;) {
    take_added();
    const bool stopping = server_.stopping_.load();
    const std::int64_t now = steady_ns();
    const bool timers_due = stopping || now - timers_ns >= kTimersNs;
    if (timers_due) timers_ns = now;
    const bool hot = turn_all(timers_due);
    if (stopping && conns_.empty() && inbox_.empty()) break;
    if (hot) {
      if (polls_) stop_polling(true);
      idle = false;
      busy_ns = steady_ns();
      continue;
    }
    if (!idle) spell();
    idle = true;
    if (polling(busy_ns)) {
      for (auto& c : conns_) c->hot_ = true;
      continue;
    }
    sleep();
  }
  if (polls_) server_.pollers_.fetch_sub(1);
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
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.ep_->wait_fd(), nullptr);
    c.finish();
    std::swap(conns_[i], conns_.back());
    conns_.pop_back();
    load_.fetch_sub(1, std::memory_order_relaxed);
  }
  return hot;
}

// ORDER: after inbox_.sleep_begin(), every connection's inbox read;
// ServerConnection::post() pushes, then wakes the loop through inbox_ (see
// LoopInbox): a request posted meanwhile is either seen here or wakes it.
// The inbox reads are relaxed, so sleep() puts a seq_cst fence between
// sleep_begin's store and them (else a weakly ordered CPU may read first,
// and a worker's reply waits out kSleepMs).
bool ProgressLoop::arm() {
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

void ProgressLoop::sleep() {
  if (!inbox_.sleep_begin()) return;  // a connection added
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!arm()) {
    inbox_.sleep_end();
    return;
  }
  epoll_event ev[64];
  const int n = epoll_wait(epoll_fd_, ev, 64, kSleepMs);
  inbox_.sleep_end();
  for (int i = 0; i < n; ++i) {
    if (ev[i].data.ptr) {
      static_cast<ServerConnection*>(ev[i].data.ptr)->hot_ = true;
    } else {
      inbox_.woke();
    }
  }
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
