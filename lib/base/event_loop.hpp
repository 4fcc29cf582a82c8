// One of the server's per-core event loops: a thread that turns the
// connections of both transports given to it (TCP sockets, RPC-RDMA
// completion queues), so what runs to completion where it arrived runs on
// the same threads whichever wire it came by. Each transport puts a part on
// every loop (LoopPart: tcp::TcpLoop, rdma::ProgressLoop), which owns that
// transport's connections there and the rest of its per-loop state.
//
// Theory of operation: a round turns every part (what other threads posted,
// connections with work, timers). While a part says work is left the loop
// goes round again, looking at its descriptors without waiting; with none,
// a part may ask to poll rather than sleep (RPC-RDMA at queue depth 1). Else
// the loop sleeps in epoll: it tells its waker first (LoopWaker, so posts
// from then on write its eventfd), then asks each part to arm (RPC-RDMA:
// fi_trywait on each completion queue; false: work came meanwhile), and
// waits for the first event, or for the shortest timer a part asks for.
// Each event goes to the part that watched its descriptor, with the key it
// gave.
//
// Ending: a part says when it is finished (its transport stopped and its
// connections dropped); the loop then turns it no more and tells it so
// (retired()), after which its transport may free it. stop() asks the loop
// to end once every part is finished.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/base/fd.hpp"
#include "lib/base/loop_inbox.hpp"

namespace nfsrdma {

class LoopPart {
 public:
  virtual ~LoopPart() = default;
  // A round: what was posted, the connections with work, timers. `now` is
  // steady_ns(). True while work is left (the loop does not sleep).
  virtual bool turn(std::int64_t now) = 0;
  // A descriptor this part watched with `key` reported `events`.
  virtual void on_event(std::uint64_t key, std::uint32_t events) = 0;
  // No part had work: true to poll through this round rather than sleep.
  virtual bool poll_idle() { return false; }
  // After the waker's sleep_begin, before the wait: false when work came
  // meanwhile (the loop only looks at its descriptors and turns again).
  virtual bool arm() = 0;
  // The longest the loop may sleep for this part's timers, in ms.
  virtual int sleep_ms() const = 0;
  // Its transport stopped and nothing is left: the loop turns it no more.
  virtual bool finished() = 0;
  // The loop's last call to a part that finished: after it, the part may go.
  virtual void retired() {}

 private:
  friend class EventLoop;
  std::uint64_t slot_ = 0;  // its index in the loop's parts
};

// A transport's count of its parts the loops are done with: each part's
// retired() calls one(); the transport waits for all of them before it
// frees what they use.
class RetiredParts {
 public:
  void one() {
    std::lock_guard lk(mu_);
    ++count_;
    cv_.notify_all();
  }
  void wait_for(std::size_t parts) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return count_ >= parts; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t count_ = 0;  // guarded by mu_
};

class EventLoop {
 public:
  // `count` loops (0: one per core) named `prefix`-N, not started.
  static std::vector<std::shared_ptr<EventLoop>> make(unsigned count, const std::string& prefix);
  // The thread is named `name` (for top -H, and tests).
  explicit EventLoop(std::string name);
  ~EventLoop();  // stop() and join()
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Thread-safe, before or after start(): `part` runs on this loop from
  // its next round until it is retired (LoopPart::retired), or the thread
  // ends (join()).
  void attach(LoopPart& part);
  void start();
  // Thread-safe: the loop ends once every part is finished.
  void stop();
  void join();

  // Thread-safe. Events on `fd` go to `part`'s on_event with `key` (below
  // 2^56: a descriptor, or an index; not a pointer, which a tagged heap may
  // set the top byte of). False, with errno, if epoll refused.
  bool watch(LoopPart& part, int fd, std::uint32_t events, std::uint64_t key);
  void rewatch(LoopPart& part, int fd, std::uint32_t events, std::uint64_t key);
  void unwatch(int fd);

  LoopWaker& waker() { return waker_; }
  // Connections of every part on this loop: a transport gives a new one to
  // the loop with the fewest, so two transports' first connections do not
  // share one loop while another idles. Thread-safe.
  std::size_t load() const { return load_.load(std::memory_order_relaxed); }
  void add_load(std::ptrdiff_t n) { load_.fetch_add(static_cast<std::size_t>(n), std::memory_order_relaxed); }
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();
  void take_attached();
  // Waits up to `timeout_ms` (0: looks) and hands out what epoll reports.
  void wait(int timeout_ms);
  void sleep();
  static std::uint64_t tag(const LoopPart& part, std::uint64_t key);

  const std::string name_;
  Fd epoll_;
  LoopWaker waker_;
  std::mutex attach_mu_;               // guards attached_, slots_
  std::vector<LoopPart*> attached_;    // not yet in parts_
  std::uint64_t slots_ = 0;            // parts attached
  std::atomic<bool> has_attached_{false};
  // Loop thread only.
  std::vector<LoopPart*> parts_;  // by slot
  std::vector<bool> finished_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> load_{0};
  std::thread thread_;
};

}  // namespace nfsrdma
