#include "server/nlm_service.hpp"

#include <thread>

#include "lib/base/log.hpp"
#include "lib/nfs3/nfs3_types.hpp"
#include "server/rpc_callback.hpp"

namespace nfsrdma::server {

using namespace nlm4;

namespace {

constexpr int kCallbackTimeoutMs = 3000;

// The request an nlm4_lock names, or why there is none.
nlm4_stats request_of(const CallContext& ctx, const nlm4_lock& l, bool exclusive, LockRequest& r) {
  if (l.fh.size() > nfs3::kFhSize) return NLM4_STALE_FH;
  r.fh.len = static_cast<std::uint32_t>(l.fh.size());
  std::copy(l.fh.begin(), l.fh.end(), r.fh.data.begin());
  if (l.l_offset > kEof) return NLM4_FBIG;
  r.start = l.l_offset;
  // Length 0, or past what off_t reaches: to the end of the file and beyond.
  r.end = l.l_len == 0 || l.l_len - 1 > kEof - l.l_offset ? kEof : l.l_offset + l.l_len - 1;
  r.exclusive = exclusive;
  r.owner = {rpc::to_v6(ctx.peer.addr), l.caller_name, l.svid, l.oh};
  return NLM4_GRANTED;
}

template <class Args>
bool decoded(xdr::Decoder& in, Args& a) {
  return xdr::decode(in, a).ok();
}

}  // namespace

NlmService::NlmService(const ExportTable& exports, StatusMonitor& nsm, LockLimits limits,
                       std::chrono::milliseconds grace, std::string name)
    : nsm_(nsm), name_(std::move(name)) {
  callbacks_ = std::make_unique<ThreadPool<std::function<void()>>>(4, [](std::function<void()>&& f) { f(); });
  locks_ = std::make_unique<LockManager>(exports, limits, [this](const Waiter& w) { granted(w); });
  const auto before = nsm_.restarted_clients();
  if (!before.empty() && grace.count() > 0) {
    grace_end_ = std::chrono::steady_clock::now() + grace;
    spdlog::info("nlm: {} client host{} held locks before this start: grace period of {} s for reclaims",
                 before.size(), before.size() == 1 ? "" : "s", grace.count() / 1000.0);
  }
  nsm_.set_handlers(
      [this](const std::string& host, const Address& addr) {
        std::size_t n = locks_->free_host(host, &addr);
        if (!locks_->holds(addr)) nsm_.unmonitor(addr);  // others at that address may still hold some
        spdlog::info("nlm: {} restarted: {} lock range{} it held released", host, n, n == 1 ? "" : "s");
      },
      [this](const StatusMonitor::Watcher& w, const nsm1::status& s) {
        static const Address kLoopback = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
        const sockaddr_storage local = rpc::from_v6(kLoopback);
        std::vector<std::uint8_t> args;
        xdr::encode(args, s);
        call_back(local, static_cast<std::uint32_t>(w.id.id.my_prog), static_cast<std::uint32_t>(w.id.id.my_vers),
                  static_cast<std::uint32_t>(w.id.id.my_proc), std::move(args), 3);
      });
}

NlmService::~NlmService() {
  stopping_ = true;
  nsm_.set_handlers({}, {});
  locks_->stop();      // no more grants
  callbacks_.reset();  // the callbacks still queued give up at once
}

void NlmService::call_back(const sockaddr_storage& peer, std::uint32_t prog, std::uint32_t vers, std::uint32_t proc,
                           std::vector<std::uint8_t> args, int attempts,
                           std::function<void(Result<std::vector<std::uint8_t>>)> done) {
  const Address addr = rpc::to_v6(peer);
  {
    std::lock_guard lk(cb_mu_);
    if (cb_total_ >= kCallbacks || cb_pending_[addr] >= kCallbacksPerAddress) {
      NFSRDMA_LOG_LIMITED(info, "nlm: callback to {} dropped: too many waiting", address_text(peer));
      if (done) done(rpc::rpc_error("nlm: too many callbacks waiting"));
      return;
    }
    ++cb_total_;
    ++cb_pending_[addr];
  }
  callbacks_->post([this, peer, addr, prog, vers, proc, args = std::move(args), attempts, done = std::move(done)] {
    Result<std::vector<std::uint8_t>> r = rpc::rpc_error("nlm: server stopping");
    for (int i = 0; i < attempts && !stopping_; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
      r = call_host(peer, prog, vers, proc, args, kCallbackTimeoutMs);
      if (r) break;
      NFSRDMA_LOG_LIMITED(info, "nlm: callback to {} (program {} procedure {}): {}", address_text(peer), prog, proc,
                          r.error().describe());
    }
    if (done) done(std::move(r));
    std::lock_guard lk(cb_mu_);
    --cb_total_;
    if (--cb_pending_[addr] == 0) cb_pending_.erase(addr);
  });
}

void NlmService::granted(const Waiter& w) {
  nlm4_testargs g;
  g.cookie = w.cookie;
  g.exclusive = w.req.exclusive;
  g.alock = {name_, {w.req.fh.bytes().begin(), w.req.fh.bytes().end()}, w.req.owner.oh, w.req.owner.svid,
             w.req.start, w.req.end == kEof ? 0 : w.req.end - w.req.start + 1};
  std::vector<std::uint8_t> args;
  xdr::encode(args, g);
  call_back(w.peer, kProgram, kVersion, static_cast<std::uint32_t>(Proc::GRANTED), std::move(args), 3,
            [this, req = w.req](Result<std::vector<std::uint8_t>> r) {
              nlm4_res res;
              // A client that no longer waits says so, and the lock goes. One
              // that cannot be reached keeps it, as lockd does: its next LOCK
              // (clients ask again while they wait) is answered GRANTED.
              if (r && xdr::decode(*r, res).ok() && res.stat != NLM4_GRANTED && !stopping_) locks_->unlock(req);
            });
}

nlm4_stats NlmService::lock(const CallContext& ctx, const nlm4_lockargs& a, bool monitor) {
  if (in_grace() && !a.reclaim) return NLM4_DENIED_GRACE_PERIOD;
  LockRequest r;
  if (auto s = request_of(ctx, a.alock, a.exclusive, r); s != NLM4_GRANTED) return s;
  // ORDER: the client is on record before it holds anything, so a restart
  // now still tells it to reclaim.
  if (monitor && !nsm_.monitor(r.owner.addr, r.owner.host)) return NLM4_DENIED_NOLOCKS;
  Waiter w{r, ctx.peer.addr, a.cookie};
  return locks_->lock(r, ctx.peer.addr, a.block && monitor ? &w : nullptr);
}

void NlmService::test(const CallContext& ctx, const nlm4_testargs& a, nlm4_testres& res) {
  res.cookie = a.cookie;
  if (in_grace()) {
    res.stat = NLM4_DENIED_GRACE_PERIOD;
    return;
  }
  LockRequest r;
  res.stat = request_of(ctx, a.alock, a.exclusive, r);
  if (res.stat == NLM4_GRANTED) res.stat = locks_->test(r, ctx.peer.addr, res.holder);
}

rpc::AcceptStat NlmService::handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in, xdr::Encoder& out) {
  // The _MSG forms (6-10) run as their plain form (1-5) and answer through
  // the client's _RES procedure (11-15); the reply itself is empty.
  const bool msg = proc >= 6 && proc <= 10;
  const auto p = static_cast<Proc>(msg ? proc - 5 : proc);
  auto answer = [&](const auto& result) {
    if (!msg) {
      codec(out, const_cast<std::remove_cvref_t<decltype(result)>&>(result));
      return rpc::AcceptStat::success;
    }
    std::vector<std::uint8_t> args;
    xdr::encode(args, result);
    call_back(ctx.peer.addr, kProgram, kVersion, proc + 5, std::move(args), 1);
    return rpc::AcceptStat::success;
  };
  switch (p) {
    case Proc::NULL_:
      return rpc::AcceptStat::success;
    case Proc::TEST: {
      nlm4_testargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      nlm4_testres res;
      test(ctx, a, res);
      return answer(res);
    }
    case Proc::LOCK:
    case Proc::NM_LOCK: {
      nlm4_lockargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      // NM_LOCK: a client without a status monitor; never blocks (XNFS 10.14).
      return answer(nlm4_res{a.cookie, lock(ctx, a, p == Proc::LOCK)});
    }
    case Proc::CANCEL: {
      nlm4_cancargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      LockRequest r;
      nlm4_stats s = request_of(ctx, a.alock, a.exclusive, r);
      if (s == NLM4_GRANTED) s = locks_->cancel(r);
      return answer(nlm4_res{a.cookie, s});
    }
    case Proc::UNLOCK: {
      nlm4_unlockargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      LockRequest r;
      nlm4_stats s = request_of(ctx, a.alock, false, r);
      if (s == NLM4_GRANTED) s = locks_->unlock(r);
      return answer(nlm4_res{a.cookie, s});
    }
    case Proc::GRANTED: {
      // Only a lock client waits for GRANTED; nothing here does.
      nlm4_testargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      return answer(nlm4_res{a.cookie, NLM4_DENIED});
    }
    case Proc::TEST_RES: case Proc::LOCK_RES: case Proc::CANCEL_RES: case Proc::UNLOCK_RES: case Proc::GRANTED_RES:
      return rpc::AcceptStat::success;  // answers to callbacks this server does not make asynchronously
    case Proc::SHARE:
    case Proc::UNSHARE: {
      nlm4_shareargs a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      nlm4_shareres res{a.cookie, NLM4_GRANTED, 0};
      LockOwner o{rpc::to_v6(ctx.peer.addr), a.share.caller_name, 0, a.share.oh};
      nfs3::nfs_fh3 fh;
      if (a.share.fh.size() > nfs3::kFhSize) {
        res.stat = NLM4_STALE_FH;
      } else if (p == Proc::UNSHARE) {
        fh.len = static_cast<std::uint32_t>(a.share.fh.size());
        std::copy(a.share.fh.begin(), a.share.fh.end(), fh.data.begin());
        res.stat = locks_->unshare(o, fh);
      } else if (in_grace() && !a.reclaim) {
        res.stat = NLM4_DENIED_GRACE_PERIOD;
      } else if (!nsm_.monitor(o.addr, o.host)) {
        res.stat = NLM4_DENIED_NOLOCKS;
      } else {
        fh.len = static_cast<std::uint32_t>(a.share.fh.size());
        std::copy(a.share.fh.begin(), a.share.fh.end(), fh.data.begin());
        res.stat = locks_->share(o, fh, ctx.peer.addr, a.share.mode, a.share.access);
      }
      codec(out, res);
      return rpc::AcceptStat::success;
    }
    case Proc::FREE_ALL: {
      nlm4_notify a;
      if (!decoded(in, a)) return rpc::AcceptStat::garbage_args;
      // From the local status monitor only (lockd checks the same).
      if (rpc::is_loopback(ctx.peer.addr)) {
        std::size_t n = locks_->free_host(a.name, nullptr);
        spdlog::info("nlm: FREE_ALL for {}: {} lock range{} released", a.name, n, n == 1 ? "" : "s");
      }
      return rpc::AcceptStat::success;
    }
    default:
      break;
  }
  return rpc::AcceptStat::proc_unavail;
}

void NlmService::notify_restart() {
  const nsm1::stat_chge n{name_, nsm_.state()};
  for (const auto& c : nsm_.restarted_clients()) {
    const sockaddr_storage peer = rpc::from_v6(c.addr);
    std::vector<std::uint8_t> args;
    xdr::encode(args, n);
    // As sm-notify, tried for a while (here about a minute); a client that
    // never answers is then forgotten.
    const int attempts = 15;
    call_back(peer, nsm1::kProgram, nsm1::kVersion, static_cast<std::uint32_t>(nsm1::Proc::NOTIFY), std::move(args),
              attempts, [this, c, peer](Result<std::vector<std::uint8_t>> r) {
                if (r) spdlog::info("nsm: told {} ({}) that this server restarted", c.name, address_text(peer));
                else spdlog::warn("nsm: could not tell {} ({}) that this server restarted: {}", c.name,
                                  address_text(peer), r.error().describe());
                if (!locks_->holds(c.addr)) nsm_.unmonitor(c.addr);
              });
  }
}

}  // namespace nfsrdma::server
