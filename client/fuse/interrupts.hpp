// Killable waits: a process killed while its request waits on the server gets
// its answer at once, as on a kernel NFS mount (hard or soft), instead of
// staying in D state until the server returns.
//
// Theory of operation: for any signal to a process whose request the daemon
// holds, the kernel sends FUSE_INTERRUPT (once per request, however many
// signals follow) and libfuse calls interrupted(). Only a fatal signal ends a
// wait: a hard mount waits through the others, as the kernel client's
// killable waits do. The watch thread reads the caller's pending signals in
// /proc; once SIGKILL is among them (the kernel adds it to every thread of a
// process being killed, whatever the fatal signal), or the caller is exiting
// on a signal, it ends what the caller
// waits on: its NFS calls (NfsClient::cancel_calls_of, which also fails the
// calls it would make next) and the waits made for it through guard(). The
// request's own completion then answers it, EINTR, once. A caller
// interrupted by a signal that is not fatal is watched every 100 ms while it
// still waits on something. So is the caller of a guarded wait or an NFS
// call older than a second, since the kernel sends no interrupt for some
// waits: the FLUSH of each file a killed process's exit closes, the
// background READs of an O_DIRECT read. A cancelled caller is released when
// its /proc entry is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "client/core/nfs_client.hpp"

namespace nfsrdma::fuse {

class Interrupts {
 public:
  explicit Interrupts(client::NfsClient& nfs);
  ~Interrupts();
  // Ends the watch thread (once the session is over: it answers requests).
  void stop();

  // From libfuse's interrupt callback: the request of `pid` was interrupted.
  void interrupted(std::uint32_t pid);
  // `answer` wrapped for a wait that is not an NFS call of the caller's (the
  // write-back's drain and commit, whose calls are nobody's): it runs once,
  // either from the wait's end or with EINTR when the caller (the current
  // client::CallOwner) is killed, whichever comes first. The wrapper
  // returns whether its call answered (false: the EINTR went first).
  std::function<bool(int)> guard(std::function<void(int)> answer);

 private:
  struct Wait {
    std::uint32_t pid = 0;
    std::chrono::steady_clock::time_point since;
    std::atomic<bool> answered{false};
    std::function<void(int)> answer;
  };
  struct Watched {
    std::uint32_t pid = 0;
    bool cancelled = false;
    std::uint64_t seq = 0;  // moved by each interrupt, so a look taken before it drops nothing
  };
  bool waits_on_guard(std::uint32_t pid);
  void cancel(std::uint32_t pid);
  void loop(std::stop_token stop);

  client::NfsClient& nfs_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::vector<Watched> watched_;               // guarded by mu_
  std::vector<std::weak_ptr<Wait>> waits_;     // guarded by mu_; expired ones pruned as it grows
  std::size_t prune_at_ = 64;                  // guarded by mu_
  std::jthread watcher_;
};

}  // namespace nfsrdma::fuse
