#include "server/lock_manager.hpp"

#include <fcntl.h>

#include "lib/base/log.hpp"
#include "server/fs.hpp"
#include "server/identity.hpp"

namespace nfsrdma::server {

using namespace nlm4;

namespace {

struct flock range_flock(short type, std::uint64_t start, std::uint64_t end) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(start);
  fl.l_len = end == kEof ? 0 : static_cast<off_t>(end - start + 1);
  return fl;
}

void fill_holder(nlm4_holder& h, const LockOwner* o, std::int32_t pid, bool exclusive, std::uint64_t start,
                 std::uint64_t end) {
  h.exclusive = exclusive;
  h.svid = o ? o->svid : pid;
  h.oh = o ? o->oh : netobj{};
  h.l_offset = start;
  h.l_len = end == kEof ? 0 : end - start + 1;
}

bool same_request(const LockRequest& a, const LockRequest& b) {
  return a.owner == b.owner && a.start == b.start && a.end == b.end && a.exclusive == b.exclusive;
}

}  // namespace

LockManager::LockManager(const ExportTable& exports, LockLimits limits, std::function<void(const Waiter&)> on_granted)
    : exports_(exports), limits_(limits), on_granted_(std::move(on_granted)),
      ranges_gauge_(metrics::registry().gauge("nfsrdma_server_lock_ranges",
                                              "Byte ranges clients hold locked through NLM")),
      waiters_gauge_(metrics::registry().gauge("nfsrdma_server_lock_waiters",
                                               "Blocked NLM LOCKs queued until they can be granted")),
      retrier_([this](std::stop_token st) { retry(st); }) {}

LockManager::~LockManager() { stop(); }

void LockManager::stop() {
  retrier_.request_stop();
  if (retrier_.joinable()) retrier_.join();
}

LockManager::Stat LockManager::open_for_lock(const nfs3::nfs_fh3& fh, const sockaddr_storage& peer, bool write,
                                             Fd& out) const {
  if (!become_root()) return NLM4_FAILED;
  Object o;
  if (auto s = open_handle(exports_, fh, o); s != nfs3::NFS3_OK) {
    return s == nfs3::NFS3ERR_STALE || s == nfs3::NFS3ERR_BADHANDLE ? NLM4_STALE_FH : NLM4_FAILED;
  }
  const ExportOptions* opts = o.ex->entry().options_for(peer);
  if (!opts) return NLM4_FAILED;  // as nfsd: no access to the export, no locks in it
  if (write && !opts->rw) return NLM4_ROFS;
  struct stat st {};
  if (stat_fd(o.fd.get(), st) != 0 || !S_ISREG(st.st_mode)) return NLM4_FAILED;  // lockd locks regular files only
  // Root opens it, as lockd does: a lock is not a read or a write.
  const int mode = opts->rw ? O_RDWR : O_RDONLY;
  int fd = ::open(ProcPath(o.fd.get()).c_str(), mode | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && mode == O_RDWR && (errno == EACCES || errno == EROFS || errno == ETXTBSY)) {
    if (write) return NLM4_ROFS;
    fd = ::open(ProcPath(o.fd.get()).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  }
  if (fd < 0) {
    NFSRDMA_LOG_LIMITED(warn, "nlm: cannot open a file to lock it: {}", std::strerror(errno));
    return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? NLM4_DENIED_NOLOCKS : NLM4_FAILED;
  }
  out = Fd(fd);
  return NLM4_GRANTED;
}

LockManager::Stat LockManager::set_locked(FileLocks& f, const Key& k, const LockRequest& r,
                                          const sockaddr_storage* peer, bool unlock) {
  auto it = f.holdings.find(r.owner);
  if (unlock && it == f.holdings.end()) return NLM4_GRANTED;  // nothing held: nothing to do
  Use& use = use_[r.owner.addr];
  RangeSet next = it != f.holdings.end() ? it->second.ranges : RangeSet{};
  const std::size_t before = next.size();
  using T = RangeSet::Type;
  next.apply(r.start, r.end, unlock ? T::unlock : r.exclusive ? T::exclusive : T::shared);
  if (!unlock && use.ranges - before + next.size() > limits_.ranges_per_address) {
    NFSRDMA_LOG_LIMITED(info, "nlm: {} holds {} lock ranges, the most one client may", r.owner.host, use.ranges);
    return NLM4_DENIED_NOLOCKS;
  }
  Holding fresh;
  Holding* h = it != f.holdings.end() ? &it->second : &fresh;
  if (!h->fd.valid()) {
    if (Stat s = open_for_lock(r.fh, *peer, r.exclusive, fresh.fd); s != NLM4_GRANTED) return s;
  }
  struct flock fl = range_flock(unlock ? F_UNLCK : r.exclusive ? F_WRLCK : F_RDLCK, r.start, r.end);
  if (::fcntl(h->fd.get(), F_OFD_SETLK, &fl) != 0) {
    if (errno == EAGAIN || errno == EACCES) return NLM4_DENIED;
    if (errno == ENOLCK) return NLM4_DENIED_NOLOCKS;
    if (errno == EBADF) return NLM4_ROFS;  // a write lock on a file only root could open read-only
    NFSRDMA_LOG_LIMITED(warn, "nlm: fcntl(F_OFD_SETLK): {}", std::strerror(errno));
    return NLM4_FAILED;
  }
  use.ranges = use.ranges - before + next.size();
  ranges_gauge_.add(static_cast<std::int64_t>(next.size()) - static_cast<std::int64_t>(before));
  h->ranges = std::move(next);
  if (h == &fresh) {
    f.holdings.emplace(r.owner, std::move(fresh));
  } else if (h->ranges.empty()) {
    f.holdings.erase(it);  // closing the description lets go of nothing more
  }
  if ((unlock || !r.exclusive) && !f.waiters.empty()) {
    dirty_.push_back(k);
    cv_.notify_one();
  }
  return NLM4_GRANTED;
}

void LockManager::drop_if_empty_locked(const Key& k) {
  auto it = files_.find(k);
  if (it != files_.end() && it->second.holdings.empty() && it->second.waiters.empty() && it->second.shares.empty()) {
    files_.erase(it);
  }
}

LockManager::Stat LockManager::lock(const LockRequest& r, const sockaddr_storage& peer, const Waiter* wait) {
  std::lock_guard lk(mu_);
  const Key k = key_of(r.fh);
  FileLocks& f = files_[k];
  Stat s = set_locked(f, k, r, &peer, false);
  if (s == NLM4_DENIED && wait) {
    s = NLM4_BLOCKED;
    bool queued = false;
    for (auto& w : f.waiters) queued = queued || same_request(w.req, r);
    Use& use = use_[r.owner.addr];
    if (!queued && use.waiters >= limits_.blocked_per_address) {
      s = NLM4_DENIED_NOLOCKS;
    } else if (!queued) {
      f.waiters.push_back(*wait);
      ++use.waiters;
      waiters_gauge_.add(1);
    }
  }
  drop_if_empty_locked(k);
  return s;
}

LockManager::Stat LockManager::test(const LockRequest& r, const sockaddr_storage& peer, nlm4_holder& holder) {
  std::lock_guard lk(mu_);
  const Key k = key_of(r.fh);
  Fd probe;
  int fd = -1;
  if (auto fit = files_.find(k); fit != files_.end()) {
    // Other clients' owners first, so the answer names one of them.
    for (const auto& [o, h] : fit->second.holdings) {
      if (o == r.owner) {
        fd = h.fd.get();  // its own locks never conflict
        continue;
      }
      if (auto c = h.ranges.conflict(r.start, r.end, r.exclusive)) {
        fill_holder(holder, &o, 0, c->exclusive, c->start, c->end);
        return NLM4_DENIED;
      }
    }
  }
  if (fd < 0) {
    if (Stat s = open_for_lock(r.fh, peer, false, probe); s != NLM4_GRANTED) return s;
    fd = probe.get();
  }
  // Then the kernel, for processes on the server.
  struct flock fl = range_flock(r.exclusive ? F_WRLCK : F_RDLCK, r.start, r.end);
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return NLM4_FAILED;
  if (fl.l_type == F_UNLCK) return NLM4_GRANTED;
  const auto start = static_cast<std::uint64_t>(fl.l_start);
  fill_holder(holder, nullptr, fl.l_pid, fl.l_type == F_WRLCK, start,
              fl.l_len == 0 ? kEof : start + static_cast<std::uint64_t>(fl.l_len) - 1);
  return NLM4_DENIED;
}

LockManager::Stat LockManager::unlock(const LockRequest& r) {
  std::lock_guard lk(mu_);
  const Key k = key_of(r.fh);
  auto fit = files_.find(k);
  if (fit == files_.end()) return NLM4_GRANTED;
  Stat s = set_locked(fit->second, k, r, nullptr, true);
  drop_if_empty_locked(k);
  return s;
}

LockManager::Stat LockManager::cancel(const LockRequest& r) {
  std::lock_guard lk(mu_);
  const Key k = key_of(r.fh);
  auto fit = files_.find(k);
  if (fit == files_.end()) return NLM4_GRANTED;
  auto& ws = fit->second.waiters;
  for (auto it = ws.begin(); it != ws.end(); ++it) {
    if (same_request(it->req, r)) {
      ws.erase(it);
      --use_[r.owner.addr].waiters;
      waiters_gauge_.add(-1);
      break;
    }
  }
  // One granted already is the client's to refuse in its answer to GRANTED.
  drop_if_empty_locked(k);
  return NLM4_GRANTED;
}

LockManager::Stat LockManager::share(const LockOwner& o, const nfs3::nfs_fh3& fh, const sockaddr_storage& peer,
                                     fsh4_mode mode, fsh4_access access) {
  std::lock_guard lk(mu_);
  Fd check;  // the file exists and the client may use its export
  if (Stat s = open_for_lock(fh, peer, false, check); s != NLM4_GRANTED) return s;
  const Key k = key_of(fh);
  FileLocks& f = files_[k];
  const auto m = static_cast<std::uint32_t>(mode), a = static_cast<std::uint32_t>(access);
  Share* mine = nullptr;
  for (auto& s : f.shares) {
    if (s.owner == o) {
      mine = &s;
    } else if ((static_cast<std::uint32_t>(s.mode) & a) || (static_cast<std::uint32_t>(s.access) & m)) {
      drop_if_empty_locked(k);
      return NLM4_DENIED;
    }
  }
  Use& use = use_[o.addr];
  if (mine) {
    mine->mode = mode;
    mine->access = access;
  } else if (use.shares >= limits_.ranges_per_address) {
    drop_if_empty_locked(k);
    return NLM4_DENIED_NOLOCKS;
  } else {
    f.shares.push_back({o, mode, access});
    ++use.shares;
  }
  return NLM4_GRANTED;
}

LockManager::Stat LockManager::unshare(const LockOwner& o, const nfs3::nfs_fh3& fh) {
  std::lock_guard lk(mu_);
  const Key k = key_of(fh);
  auto fit = files_.find(k);
  if (fit == files_.end()) return NLM4_GRANTED;
  use_[o.addr].shares -= std::erase_if(fit->second.shares, [&](const Share& s) { return s.owner == o; });
  drop_if_empty_locked(k);
  return NLM4_GRANTED;
}

std::size_t LockManager::free_host(const std::string& name, const Address* addr) {
  std::lock_guard lk(mu_);
  auto match = [&](const LockOwner& o) { return o.host == name && (!addr || o.addr == *addr); };
  std::size_t freed = 0;
  for (auto fit = files_.begin(); fit != files_.end();) {
    FileLocks& f = fit->second;
    for (auto it = f.holdings.begin(); it != f.holdings.end();) {
      if (!match(it->first)) {
        ++it;
        continue;
      }
      use_[it->first.addr].ranges -= it->second.ranges.size();
      ranges_gauge_.add(-static_cast<std::int64_t>(it->second.ranges.size()));
      freed += it->second.ranges.size();
      it = f.holdings.erase(it);  // closing its description drops its locks
      dirty_.push_back(fit->first);
    }
    for (auto it = f.waiters.begin(); it != f.waiters.end();) {
      if (!match(it->req.owner)) {
        ++it;
        continue;
      }
      --use_[it->req.owner.addr].waiters;
      waiters_gauge_.add(-1);
      it = f.waiters.erase(it);
    }
    for (const auto& s : f.shares) {
      if (match(s.owner)) --use_[s.owner.addr].shares;
    }
    std::erase_if(f.shares, [&](const Share& s) { return match(s.owner); });
    fit = f.holdings.empty() && f.waiters.empty() && f.shares.empty() ? files_.erase(fit) : std::next(fit);
  }
  std::erase_if(use_, [](const auto& e) { return e.second.ranges == 0 && e.second.waiters == 0 && e.second.shares == 0; });
  cv_.notify_one();
  return freed;
}

bool LockManager::holds(const Address& addr) {
  std::lock_guard lk(mu_);
  auto it = use_.find(addr);
  return it != use_.end() && (it->second.ranges || it->second.waiters || it->second.shares);
}

bool LockManager::retry_file_locked(const Key& k, std::vector<Waiter>& granted) {
  auto fit = files_.find(k);
  if (fit == files_.end()) return false;
  FileLocks& f = fit->second;
  for (auto it = f.waiters.begin(); it != f.waiters.end();) {
    Stat s = set_locked(f, k, it->req, &it->peer, false);
    if (s == NLM4_DENIED) {
      ++it;
      continue;
    }
    // Granted, or it never can be (the file went): either way it waits no more.
    --use_[it->req.owner.addr].waiters;
    waiters_gauge_.add(-1);
    if (s == NLM4_GRANTED) granted.push_back(std::move(*it));
    it = f.waiters.erase(it);
  }
  drop_if_empty_locked(k);
  return true;
}

void LockManager::retry(std::stop_token stop) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lk(mu_);
  auto last_scan = Clock::now();
  while (!stop.stop_requested()) {
    cv_.wait_for(lk, stop, std::chrono::seconds(1), [&] { return !dirty_.empty(); });
    std::vector<Key> keys;
    keys.swap(dirty_);
    if (Clock::now() - last_scan >= std::chrono::seconds(1)) {
      // Processes on the server do not say when they unlock: look again.
      last_scan = Clock::now();
      for (const auto& [k, f] : files_) {
        if (!f.waiters.empty()) keys.push_back(k);
      }
    }
    std::vector<Waiter> granted;
    for (const auto& k : keys) retry_file_locked(k, granted);
    if (granted.empty()) continue;
    lk.unlock();
    for (const auto& w : granted) on_granted_(w);
    lk.lock();
  }
}

}  // namespace nfsrdma::server
