// The NLM version 4 program (nlm4.hpp) over the LockManager: every
// procedure, the grace period after a restart in which only reclaims are
// granted, the NSM record of each client before its first lock, and the
// calls back to clients (GRANTED when a blocked lock is granted, the _RES
// answers to _MSG calls, SM_NOTIFY to the clients of before a restart), made
// on callback threads of their own so no worker waits on a client.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include "lib/base/thread_pool.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"
#include "server/lock_manager.hpp"
#include "server/nsm_service.hpp"

namespace nfsrdma::server {

class NlmService {
 public:
  // `grace` applies only when some client held locks before this start.
  // `name`: this server's name in SM_NOTIFY and GRANTED.
  NlmService(const ExportTable& exports, StatusMonitor& nsm, LockLimits limits, std::chrono::milliseconds grace,
             std::string name);
  ~NlmService();

  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in, xdr::Encoder& out);
  LockManager& locks() { return *locks_; }
  bool in_grace() const { return std::chrono::steady_clock::now() < grace_end_; }
  // SM_NOTIFY to every client that held locks before this start.
  void notify_restart();

 private:
  nlm4::nlm4_stats lock(const CallContext& ctx, const nlm4::nlm4_lockargs& a, bool monitor);
  void test(const CallContext& ctx, const nlm4::nlm4_testargs& a, nlm4::nlm4_testres& res);
  // A blocked lock now holds: tell the client (GRANTED), which may refuse it.
  void granted(const Waiter& w);
  // Calls `proc` of program `prog` on the host at `peer` with `args`, on a
  // callback thread, trying `attempts` times; `done` gets the result bytes.
  void call_back(const sockaddr_storage& peer, std::uint32_t prog, std::uint32_t vers, std::uint32_t proc,
                 std::vector<std::uint8_t> args, int attempts,
                 std::function<void(Result<std::vector<std::uint8_t>>)> done = {});

  StatusMonitor& nsm_;
  const std::string name_;
  std::chrono::steady_clock::time_point grace_end_;
  std::atomic<bool> stopping_{false};
  // Callbacks queued or running, per client address and in all: bounded, so
  // a client sending _MSG calls from an address that never answers cannot
  // grow the queue (past the bound a callback is dropped, and the client's
  // retransmission asks again).
  static constexpr std::size_t kCallbacksPerAddress = 64, kCallbacks = 4096;
  std::mutex cb_mu_;
  std::map<Address, std::size_t> cb_pending_;
  std::size_t cb_total_ = 0;
  std::unique_ptr<LockManager> locks_;
  // ORDER: stopped first (~NlmService), so no callback outlives locks_.
  std::unique_ptr<ThreadPool<std::function<void()>>> callbacks_;
};

}  // namespace nfsrdma::server
