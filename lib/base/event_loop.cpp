#include "lib/base/event_loop.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma {

namespace {
// epoll's data: the part's index in the top byte, its key below; the waker
// is the all-ones tag.
constexpr int kPartShift = 56;
constexpr std::uint64_t kKeyMask = (std::uint64_t{1} << kPartShift) - 1;
constexpr std::uint64_t kWaker = ~std::uint64_t{0};
}  // namespace

std::vector<std::shared_ptr<EventLoop>> EventLoop::make(unsigned count, const std::string& prefix) {
  const unsigned n = count ? count : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::shared_ptr<EventLoop>> loops;
  for (unsigned i = 0; i < n; ++i) loops.push_back(std::make_shared<EventLoop>(prefix + "-" + std::to_string(i)));
  return loops;
}

EventLoop::EventLoop(std::string name) : name_(std::move(name)), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_.valid()) {
    spdlog::critical("cannot make an event loop: {}", std::strerror(errno));
    std::abort();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWaker;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, waker_.fd(), &ev) != 0) {
    spdlog::critical("cannot make an event loop: {}", std::strerror(errno));
    std::abort();
  }
}

EventLoop::~EventLoop() {
  stop();
  join();
}

void EventLoop::attach(LoopPart& part) {
  {
    std::lock_guard lk(attach_mu_);
    NFSRDMA_CHECK(slots_ < 255);
    part.slot_ = slots_++;
    attached_.push_back(&part);
    has_attached_.store(true);
  }
  waker_.wake();
}

void EventLoop::take_attached() {
  if (!has_attached_.load()) return;
  std::lock_guard lk(attach_mu_);
  for (LoopPart* p : attached_) {
    parts_.push_back(p);  // slots are given in order
    finished_.push_back(false);
  }
  attached_.clear();
  has_attached_.store(false);
}

void EventLoop::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), name_.c_str());
    run();
  });
}

void EventLoop::stop() {
  stop_.store(true);
  waker_.wake_now();  // read before sleep_begin
}

void EventLoop::join() {
  if (thread_.joinable()) thread_.join();
}

std::uint64_t EventLoop::tag(const LoopPart& part, std::uint64_t key) {
  NFSRDMA_CHECK(key <= kKeyMask);
  return part.slot_ << kPartShift | key;
}

bool EventLoop::watch(LoopPart& part, int fd, std::uint32_t events, std::uint64_t key) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag(part, key);
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

void EventLoop::rewatch(LoopPart& part, int fd, std::uint32_t events, std::uint64_t key) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag(part, key);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::unwatch(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::run() {
  for (;;) {
    take_attached();
    const std::int64_t now = steady_ns();
    bool hot = false, all_finished = true;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (finished_[i]) continue;
      hot = parts_[i]->turn(now) || hot;
      if (parts_[i]->finished()) {
        finished_[i] = true;
        parts_[i]->retired();  // ORDER: the loop's last use of the part
      }
      all_finished = all_finished && finished_[i];
    }
    if (stop_.load() && all_finished) break;
    bool poll = hot;
    if (!hot) {
      for (std::size_t i = 0; i < parts_.size(); ++i) poll = (!finished_[i] && parts_[i]->poll_idle()) || poll;
    }
    // Busy or polling: descriptors only looked at, so one part's work does
    // not keep another's events waiting.
    if (poll) {
      if (parts_.size() > 1) wait(0);
      continue;
    }
    sleep();
  }
}

// ORDER: after waker_.sleep_begin(), every part's arm() looks at its work
// (its inboxes, its connections' own), which posters store before they read
// the waker's flag (loop_inbox.hpp). Parts may read their work relaxed, so a
// seq_cst fence stands between the flag's store and those reads.
void EventLoop::sleep() {
  waker_.sleep_begin();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (has_attached_.load(std::memory_order_relaxed)) {
    waker_.sleep_end();
    return;
  }
  int timeout = 1000;
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    if (finished_[i]) continue;
    if (!parts_[i]->arm()) {
      wait(0);  // work came: still look, so it cannot keep other descriptors waiting
      return;
    }
    timeout = std::min(timeout, parts_[i]->sleep_ms());
  }
  if (stop_.load()) timeout = std::min(timeout, 50);
  wait(timeout);
}

void EventLoop::wait(int timeout_ms) {
  epoll_event ev[64];
  const int n = ::epoll_wait(epoll_.get(), ev, 64, timeout_ms);
  waker_.sleep_end();
  take_attached();  // a part's descriptors may report before its first round
  if (n < 0 && errno != EINTR) {
    spdlog::error("{}: epoll_wait failed: {}", name_, std::strerror(errno));
    return;
  }
  for (int i = 0; i < n; ++i) {
    const std::uint64_t data = ev[i].data.u64;
    if (data == kWaker) {
      waker_.woke();
      continue;
    }
    const std::size_t part = data >> kPartShift;
    if (!finished_[part]) parts_[part]->on_event(data & kKeyMask, ev[i].events);
  }
}

}  // namespace nfsrdma
