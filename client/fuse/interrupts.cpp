#include "client/fuse/interrupts.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "lib/base/log.hpp"
#include "lib/base/procfs.hpp"

namespace nfsrdma::fuse {
namespace {

constexpr std::size_t kMaxWatched = 4096;  // processes with an interrupted request; more are not watched
constexpr auto kLook = std::chrono::milliseconds(100);  // how often a watched process is looked at
constexpr auto kOldWait = std::chrono::seconds(1);      // a guarded wait this old gets its caller watched

enum class Caller : std::uint8_t { gone, killed, alive };

// Whether thread `pid` is gone, being killed, or neither. Killed: SIGKILL
// pending (to it or its process), or exiting on a signal, where the signal
// went once taken, and where a killed process closing its files waits on
// their FLUSH. A process exiting normally still waits for its data, as the
// kernel client makes it.
Caller look_at(std::uint32_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream in(dir + "/status");
  if (!in) return Caller::gone;
  constexpr unsigned long long kKill = 1ull << (9 - 1);  // SIGKILL's bit in SigPnd and ShdPnd
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
      if (std::stoull(line.substr(7), nullptr, 16) & kKill) return Caller::killed;
    }
  }
  // proc_pid_stat(5): field 9 holds the task's flags, field 52 its exit
  // code, set before an exit closes its files.
  const auto field = proc_stat_fields(dir + "/stat");
  if (field.empty()) return Caller::gone;
  if (field.size() <= 52) return Caller::alive;
  constexpr unsigned long kExiting = 0x4;  // PF_EXITING
  const bool exiting = std::stoul(field[9]) & kExiting;
  const bool by_signal = (std::stol(field[52]) & 0x7f) != 0;  // as WIFSIGNALED reads it
  return exiting && by_signal ? Caller::killed : Caller::alive;
}

}  // namespace

Interrupts::Interrupts(client::NfsClient& nfs)
    : nfs_(nfs), watcher_([this](std::stop_token stop) { loop(stop); }) {}

Interrupts::~Interrupts() { stop(); }

void Interrupts::stop() {
  watcher_.request_stop();
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void Interrupts::interrupted(std::uint32_t pid) {
  {
    std::lock_guard lk(mu_);
    if (auto it = std::ranges::find_if(watched_, [pid](const Watched& w) { return w.pid == pid; });
        it != watched_.end()) {
      ++it->seq;  // another request of its: the watch the loop may be ending stays
      return;
    }
    if (watched_.size() >= kMaxWatched) {
      NFSRDMA_LOG_LIMITED(warn, "fuse: {} processes with interrupted requests already watched; not {}", kMaxWatched,
                          pid);
      return;
    }
    watched_.push_back({pid, false, 0});
  }
  cv_.notify_all();
}

std::function<bool(int)> Interrupts::guard(std::function<void(int)> answer) {
  auto w = std::make_shared<Wait>();
  w->pid = client::CallOwner::current();
  w->since = std::chrono::steady_clock::now();
  w->answer = std::move(answer);
  if (w->pid != 0) {
    std::unique_lock lk(mu_);
    if (std::ranges::any_of(watched_, [&](const Watched& v) { return v.pid == w->pid && v.cancelled; })) {
      // Killed already: a request it makes now (the FLUSH of each file its
      // exit closes) ends at once, as its NFS calls do.
      lk.unlock();
      w->answered = true;
      client::CallOwner as(w->pid);
      w->answer(EINTR);
      return [](int) { return false; };
    }
    if (waits_.size() >= prune_at_) {
      std::erase_if(waits_, [](const std::weak_ptr<Wait>& p) { return p.expired(); });
      prune_at_ = std::max<std::size_t>(64, 2 * waits_.size());
    }
    waits_.push_back(w);
    if (waits_.size() == 1) cv_.notify_all();
  }
  return [w](int err) {
    client::CallOwner as(w->pid);  // what the answer calls is the caller's too
    if (w->answered.exchange(true)) return false;
    w->answer(err);
    return true;
  };
}

bool Interrupts::waits_on_guard(std::uint32_t pid) {
  std::lock_guard lk(mu_);
  return std::ranges::any_of(waits_, [pid](const std::weak_ptr<Wait>& p) {
    auto w = p.lock();
    return w && w->pid == pid && !w->answered.load();
  });
}

void Interrupts::cancel(std::uint32_t pid) {
  spdlog::info("fuse: process {} was killed while waiting on the server; its requests end with EINTR", pid);
  nfs_.cancel_calls_of(pid);
  std::vector<std::shared_ptr<Wait>> mine;
  {
    std::lock_guard lk(mu_);
    // ORDER: marked before the sweep, so a wait made meanwhile is either
    // swept or ended by guard() itself.
    for (auto& w : watched_) w.cancelled = w.cancelled || w.pid == pid;
    for (auto& p : waits_) {
      if (auto w = p.lock(); w && w->pid == pid) mine.push_back(std::move(w));
    }
  }
  for (auto& w : mine) {
    if (!w->answered.exchange(true)) w->answer(EINTR);
  }
}

void Interrupts::loop(std::stop_token stop) {
  std::unique_lock lk(mu_);
  while (!stop.stop_requested()) {
    std::erase_if(waits_, [](const std::weak_ptr<Wait>& p) { return p.expired(); });
    if (!watched_.empty()) {
      cv_.wait_for(lk, stop, kLook, [] { return false; });
    } else {
      cv_.wait_for(lk, stop, kOldWait, [&] { return !watched_.empty(); });
    }
    if (stop.stop_requested()) break;
    // A wait this old may be one the kernel sends no interrupt for: the
    // FLUSH of a file a killed process's exit closes (the signal was taken),
    // a READ of an O_DIRECT read (sent in the background, its caller in an
    // uninterruptible wait). Their callers are looked at too.
    const auto old = std::chrono::steady_clock::now() - kOldWait;
    std::vector<std::uint32_t> waiting;
    for (auto& p : waits_) {
      auto w = p.lock();
      if (w && !w->answered && w->since < old) waiting.push_back(w->pid);
    }
    lk.unlock();
    for (std::uint32_t pid : nfs_.owners_waiting_longer_than(kOldWait)) waiting.push_back(pid);
    lk.lock();
    for (std::uint32_t pid : waiting) {
      if (watched_.size() < kMaxWatched && std::ranges::none_of(watched_, [&](const Watched& v) { return v.pid == pid; })) {
        watched_.push_back({pid, false, 0});
      }
    }
    const std::vector<Watched> now = watched_;
    lk.unlock();
    std::vector<Watched> done;  // no longer watched, as they were looked at
    for (const auto& w : now) {
      Caller c = look_at(w.pid);
      if (c == Caller::gone) {
        if (w.cancelled) nfs_.release_owner(w.pid);
        done.push_back(w);
      } else if (!w.cancelled && c == Caller::killed) {
        cancel(w.pid);
      } else if (!w.cancelled && !nfs_.has_calls_of(w.pid) && !waits_on_guard(w.pid)) {
        done.push_back(w);  // a signal it survived, and it waits on nothing now
      }
    }
    lk.lock();
    std::erase_if(watched_, [&](const Watched& w) {
      return std::ranges::any_of(done, [&](const Watched& d) { return d.pid == w.pid && d.seq == w.seq; });
    });
  }
}

}  // namespace nfsrdma::fuse
