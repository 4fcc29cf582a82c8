#include "client/core/lock_client.hpp"

#include <ctime>

#include "client/core/mount_client.hpp"
#include "lib/base/log.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "lib/rpc/sync_call.hpp"

namespace nfsrdma::client {

using namespace nlm4;
using namespace std::chrono_literals;

namespace {

// Our NSM state: odd while up and larger at every start (XNFS 11.1); the
// start time in seconds serves without a file to keep it in.
std::int32_t start_state() { return static_cast<std::int32_t>(std::time(nullptr) | 1); }

std::string key_bytes(const nfs3::nfs_fh3& fh) { return {fh.bytes().begin(), fh.bytes().end()}; }

// Sleeps `d` in short steps; false as soon as `interrupted` says so.
bool pause(std::chrono::milliseconds d, const std::function<bool()>& interrupted) {
  for (auto slept = 0ms; slept < d; slept += 20ms) {
    if (interrupted && interrupted()) return false;
    std::this_thread::sleep_for(20ms);
  }
  return !(interrupted && interrupted());
}

}  // namespace

LockClient::LockClient(LockClientOptions options)
    : options_(std::move(options)), state_(start_state()), monitor_([this](std::stop_token st) { monitor(st); }) {}

LockClient::~LockClient() {
  monitor_.request_stop();
  monitor_.join();
  std::lock_guard lk(call_mu_);
  if (nlm_) nlm_->shutdown();
  if (nsm_) nsm_->shutdown();
}

int LockClient::no_lock_manager(const std::string& why) {
  if (!said_no_nlm_.exchange(true)) {
    spdlog::warn("locks: no network lock manager on {} ({}): fcntl and flock locks fail with ENOLCK; mount with "
                 "nolock to keep them on this client",
                 options_.host, why);
  }
  return ENOLCK;
}

Result<std::vector<std::uint8_t>> LockClient::call(std::uint32_t prog, std::uint32_t proc,
                                                   const std::vector<std::uint8_t>& args) {
  auto& conn = prog == nsm1::kProgram ? nsm_ : nlm_;
  const std::uint32_t vers = prog == nsm1::kProgram ? nsm1::kVersion : kVersion;
  const rpc::AuthSys auth{0, options_.caller_name, 0, 0, 0, {}};
  Result<std::vector<std::uint8_t>> r = rpc::rpc_error("locks: not tried");
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!conn) {
      auto port = portmap_getport(options_.host, prog, vers);
      if (!port) return port.error();
      auto c = tcp::TcpClient::connect(options_.host, *port,
                                       {.reserved_port = options_.resvport, .connect_timeout_ms = options_.timeout_ms});
      if (!c) return c.error();
      conn = std::move(*c);
    }
    r = rpc::call_sync(*conn, prog, vers, proc, args, auth, options_.timeout_ms);
    if (r) return r;
    // A broken connection, or a server that restarted: a new one, once.
    conn->shutdown();
    conn.reset();
  }
  return r;
}

nlm4_lock LockClient::alock(const nfs3::nfs_fh3& fh, Owner o, std::uint64_t start, std::uint64_t end) const {
  nlm4_lock l;
  l.caller_name = options_.caller_name;
  l.fh.assign(fh.bytes().begin(), fh.bytes().end());
  l.oh.resize(8);
  for (int i = 0; i < 8; ++i) l.oh[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(o.id >> (8 * i));
  l.svid = o.svid;
  l.l_offset = start;
  l.l_len = end == kEof ? 0 : end - start + 1;
  return l;
}

nlm4_stats LockClient::send_lock(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start,
                                 std::uint64_t end, bool block, bool reclaim, bool& failed) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, nlm4_lockargs{{}, block, exclusive, alock(fh, o, start, end), reclaim, state_});
  std::lock_guard lk(call_mu_);
  if (!server_state_) {
    // The first lock of this instance: the server first hears that we
    // restarted (an earlier instance's locks go), and we learn its state.
    std::vector<std::uint8_t> n;
    xdr::encode(n, nsm1::stat_chge{options_.caller_name, state_});
    if (auto r = call(nsm1::kProgram, static_cast<std::uint32_t>(nsm1::Proc::NOTIFY), n); !r) {
      spdlog::debug("locks: SM_NOTIFY to {}: {}", options_.host, r.error().describe());
    }
    std::vector<std::uint8_t> s;
    xdr::encode(s, nsm1::sm_name{options_.caller_name});
    nsm1::sm_stat_res st;
    if (auto r = call(nsm1::kProgram, static_cast<std::uint32_t>(nsm1::Proc::STAT), s); r && xdr::decode(*r, st).ok()) {
      std::lock_guard lk2(mu_);
      server_state_ = st.state;
    } else {
      std::lock_guard lk2(mu_);
      server_state_ = 0;  // no status monitor: restarts go unnoticed
      spdlog::warn("locks: {} has no status monitor: its restarts will not be noticed and locks not reclaimed",
                   options_.host);
    }
  }
  auto r = call(kProgram, static_cast<std::uint32_t>(Proc::LOCK), args);
  nlm4_res res;
  failed = !r || !xdr::decode(*r, res).ok();
  if (failed) {
    no_lock_manager(r ? "an undecodable answer" : r.error().describe());
    return NLM4_FAILED;
  }
  return res.stat;
}

int LockClient::lock(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start, std::uint64_t end,
                     bool wait, const std::function<bool()>& interrupted) {
  {
    // One svid per owner and file, whatever pid asks later (threads, FUSE).
    std::lock_guard lk(mu_);
    if (auto it = held_.find({key_bytes(fh), o.id}); it != held_.end()) o.svid = it->second.svid;
  }
  auto delay = 100ms;
  bool queued = false;
  for (;;) {
    bool failed = false;
    const nlm4_stats s = send_lock(fh, o, exclusive, start, end, wait, false, failed);
    if (failed) return ENOLCK;
    switch (s) {
      case NLM4_GRANTED: {
        std::lock_guard lk(mu_);
        Held& h = held_[{key_bytes(fh), o.id}];
        h.svid = o.svid;
        h.fh = fh;
        h.ranges.apply(start, end, exclusive ? RangeSet::Type::exclusive : RangeSet::Type::shared);
        return 0;
      }
      case NLM4_DENIED:
        if (!wait) return EAGAIN;
        break;  // a server that does not queue: ask again
      case NLM4_BLOCKED:
        queued = true;
        break;
      case NLM4_DENIED_GRACE_PERIOD:
        break;  // the server restarted: it takes new locks once reclaims are in
      case NLM4_DENIED_NOLOCKS: return ENOLCK;
      case NLM4_STALE_FH: return ESTALE;
      case NLM4_ROFS: return EROFS;
      case NLM4_FBIG: return EOVERFLOW;
      case NLM4_DEADLCK: return EDEADLK;
      default: return ENOLCK;
    }
    if (!pause(delay, interrupted)) {
      if (queued) {
        std::vector<std::uint8_t> args;
        xdr::encode(args, nlm4_cancargs{{}, true, exclusive, alock(fh, o, start, end)});
        std::lock_guard lk(call_mu_);
        (void)call(kProgram, static_cast<std::uint32_t>(Proc::CANCEL), args);
      }
      // WARNING: the server may have granted it just before the CANCEL. When
      // the owner held nothing there before, letting go of the range is safe.
      bool held_before = false;
      {
        std::lock_guard lk(mu_);
        auto it = held_.find({key_bytes(fh), o.id});
        held_before = it != held_.end() && it->second.ranges.conflict(start, end, true).has_value();
      }
      if (queued && !held_before) unlock(fh, o, start, end);
      return EINTR;
    }
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

int LockClient::unlock(const nfs3::nfs_fh3& fh, Owner o, std::uint64_t start, std::uint64_t end) {
  {
    // The svid its locks were taken with (FUSE passes no pid with an unlock);
    // an owner holding nothing here has nothing to let go.
    std::lock_guard lk(mu_);
    auto it = held_.find({key_bytes(fh), o.id});
    if (it == held_.end()) return 0;
    o.svid = it->second.svid;
  }
  std::vector<std::uint8_t> args;
  xdr::encode(args, nlm4_unlockargs{{}, alock(fh, o, start, end)});
  Result<std::vector<std::uint8_t>> r = rpc::rpc_error("");
  {
    std::lock_guard lk(call_mu_);
    r = call(kProgram, static_cast<std::uint32_t>(Proc::UNLOCK), args);
  }
  nlm4_res res;
  if (!r || !xdr::decode(*r, res).ok()) return no_lock_manager(r ? "an undecodable answer" : r.error().describe());
  std::lock_guard lk(mu_);
  auto it = held_.find({key_bytes(fh), o.id});
  if (it != held_.end()) {
    it->second.ranges.apply(start, end, RangeSet::Type::unlock);
    if (it->second.ranges.empty()) held_.erase(it);
  }
  return res.stat == NLM4_GRANTED || res.stat == NLM4_DENIED_GRACE_PERIOD ? 0 : ENOLCK;
}

int LockClient::test(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start, std::uint64_t end,
                     std::optional<Holder>& holder) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, nlm4_testargs{{}, exclusive, alock(fh, o, start, end)});
  for (int tries = 0;; ++tries) {
    Result<std::vector<std::uint8_t>> r = rpc::rpc_error("");
    {
      std::lock_guard lk(call_mu_);
      r = call(kProgram, static_cast<std::uint32_t>(Proc::TEST), args);
    }
    nlm4_testres res;
    if (!r || !xdr::decode(*r, res).ok()) return no_lock_manager(r ? "an undecodable answer" : r.error().describe());
    if (res.stat == NLM4_DENIED_GRACE_PERIOD && tries < 600) {
      std::this_thread::sleep_for(200ms);  // as a lock in the grace period: wait for it to end
      continue;
    }
    holder.reset();
    if (res.stat == NLM4_GRANTED) return 0;
    if (res.stat != NLM4_DENIED) return res.stat == NLM4_STALE_FH ? ESTALE : ENOLCK;
    const auto& h = res.holder;
    holder = Holder{h.exclusive, h.svid, h.l_offset,
                    h.l_len == 0 || h.l_len - 1 > kEof - h.l_offset ? kEof : h.l_offset + h.l_len - 1};
    return 0;
  }
}

void LockClient::release(const nfs3::nfs_fh3& fh, std::uint64_t owner) {
  std::int32_t svid = 0;
  {
    std::lock_guard lk(mu_);
    auto it = held_.find({key_bytes(fh), owner});
    if (it == held_.end()) return;
    svid = it->second.svid;
  }
  unlock(fh, {owner, svid}, 0, kEof);
}

bool LockClient::holds(const nfs3::nfs_fh3& fh, std::uint64_t owner) {
  std::lock_guard lk(mu_);
  return !held_.empty() && held_.count({key_bytes(fh), owner});
}

bool LockClient::lost(const nfs3::nfs_fh3& fh) {
  if (!any_lost_.load(std::memory_order_relaxed)) return false;
  std::lock_guard lk(mu_);
  return lost_.count(key_bytes(fh)) > 0;
}

void LockClient::monitor(std::stop_token stop) {
  std::unique_lock lk(mu_);
  while (!stop.stop_requested()) {
    cv_.wait_for(lk, stop, 2s, [] { return false; });
    if (stop.stop_requested() || held_.empty() || !server_state_ || *server_state_ == 0) continue;
    lk.unlock();
    std::vector<std::uint8_t> s;
    xdr::encode(s, nsm1::sm_name{options_.caller_name});
    nsm1::sm_stat_res st;
    bool known = false;
    {
      std::lock_guard clk(call_mu_);
      auto r = call(nsm1::kProgram, static_cast<std::uint32_t>(nsm1::Proc::STAT), s);
      known = r && xdr::decode(*r, st).ok();
    }
    lk.lock();
    if (!known || st.state == *server_state_) continue;
    spdlog::info("locks: {} restarted (NSM state {} -> {}): reclaiming {} lock owner{}", options_.host,
                 *server_state_, st.state, held_.size(), held_.size() == 1 ? "" : "s");
    server_state_ = st.state;
    lk.unlock();
    reclaim_all();
    lk.lock();
  }
}

void LockClient::reclaim_all() {
  std::map<Key, Held> held;
  {
    std::lock_guard lk(mu_);
    held = held_;
  }
  for (const auto& [key, h] : held) {
    bool ok = true;
    for (const auto& [start, range] : h.ranges) {
      bool failed = false;
      nlm4_stats s = send_lock(h.fh, {key.second, h.svid}, range.exclusive, range.start, range.end, false, true, failed);
      if (failed || s != NLM4_GRANTED) {
        ok = false;
        spdlog::error("locks: a lock held on {} could not be reclaimed ({}): I/O on that file now fails", options_.host,
                      failed ? "no answer" : stat_name(s));
        break;
      }
    }
    if (!ok) {
      {
        std::lock_guard lk(mu_);
        lost_.insert(key.first);
        any_lost_ = true;
        held_.erase(key);
      }
      if (options_.on_lost) options_.on_lost(h.fh);
    }
  }
}

}  // namespace nfsrdma::client
