// Network locks as real locks (NLM's state, as Linux lockd keeps it): every
// lock owner (client address, caller name, svid, owner handle) holds, per
// file, an open file description of its own with the kernel's OFD byte-range
// locks on it, so owners conflict with each other and with processes on the
// server exactly as POSIX locks do, and the kernel decides every conflict.
// Beside each description a RangeSet mirrors what the owner holds, to bound
// it and to name holders in TEST answers. DOS shares (NLM SHARE) are kept
// here only: the kernel has nothing like them.
//
// Blocked LOCKs wait in a queue per file and are tried again when an owner
// here unlocks in that file, and every second (a process on the server does
// not tell us when it unlocks); one granted is handed to `on_granted`, which
// tells the client (NLM GRANTED) and unlocks it if it no longer wants it.
//
// Bounded per client address: at most `ranges_per_address` ranges (each
// holding at least one, so as many descriptors), `blocked_per_address`
// waiters and as many shares; past it NLM4_DENIED_NOLOCKS, nothing else lost.
// One mutex guards it all; fcntl calls under it never wait (F_OFD_SETLK).
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nfs3_types.hpp"
#include "lib/rpc/transport.hpp"
#include "server/export_table.hpp"
#include "lib/base/metrics.hpp"
#include "lib/nfs3/lock_ranges.hpp"

namespace nfsrdma::server {

using nlm4::kEof;
using nlm4::RangeSet;

using Address = std::array<std::uint8_t, 16>;  // rpc::to_v6

struct LockOwner {
  Address addr{};
  std::string host;  // the caller_name it gave
  std::int32_t svid = 0;
  std::vector<std::uint8_t> oh;
  auto operator<=>(const LockOwner&) const = default;
};

struct LockRequest {
  LockOwner owner;
  nfs3::nfs_fh3 fh;
  bool exclusive = false;
  std::uint64_t start = 0, end = kEof;  // inclusive
};

// A blocked LOCK: what to grant and whom to tell.
struct Waiter {
  LockRequest req;
  sockaddr_storage peer{};
  std::vector<std::uint8_t> cookie;
};

struct LockLimits {
  std::size_t ranges_per_address = 1024;
  std::size_t blocked_per_address = 64;
};

class LockManager {
 public:
  using Stat = nlm4::nlm4_stats;
  LockManager(const ExportTable& exports, LockLimits limits, std::function<void(const Waiter&)> on_granted);
  ~LockManager();
  // Stops the retries: no `on_granted` runs once it returns.
  void stop();
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;

  // `peer` is the caller's address, for the export's client list. With
  // `wait`, a conflict queues `waiter` and answers NLM4_BLOCKED.
  Stat lock(const LockRequest& r, const sockaddr_storage& peer, const Waiter* wait);
  // NLM4_GRANTED, or NLM4_DENIED with `holder` filled.
  Stat test(const LockRequest& r, const sockaddr_storage& peer, nlm4::nlm4_holder& holder);
  Stat unlock(const LockRequest& r);
  // Takes a queued waiter out (CANCEL); one already granted is released.
  Stat cancel(const LockRequest& r);
  Stat share(const LockOwner& o, const nfs3::nfs_fh3& fh, const sockaddr_storage& peer, nlm4::fsh4_mode mode,
             nlm4::fsh4_access access);
  Stat unshare(const LockOwner& o, const nfs3::nfs_fh3& fh);
  // Drops every lock, share and waiter of the hosts called `name` (FREE_ALL;
  // an SM_NOTIFY: they restarted) and, if given, only those at `addr`.
  std::size_t free_host(const std::string& name, const Address* addr);
  // Whether anything is held from `addr` now.
  bool holds(const Address& addr);

 private:
  struct Holding {
    Fd fd;  // opened by root for this owner alone: its OFD locks are the owner's
    RangeSet ranges;
  };
  struct Share {
    LockOwner owner;
    nlm4::fsh4_mode mode;
    nlm4::fsh4_access access;
  };
  struct FileLocks {
    std::map<LockOwner, Holding> holdings;
    std::list<Waiter> waiters;
    std::vector<Share> shares;
  };
  struct Use {
    std::size_t ranges = 0, waiters = 0, shares = 0;
  };
  using Key = std::string;  // the handle's bytes
  static Key key_of(const nfs3::nfs_fh3& fh) { return Key(fh.bytes().begin(), fh.bytes().end()); }

  // The file `fh` names opened for locking (read-write, else read-only).
  // `write`: for an exclusive lock (NLM4_ROFS on a read-only export).
  Stat open_for_lock(const nfs3::nfs_fh3& fh, const sockaddr_storage& peer, bool write, Fd& out) const;
  // One fcntl(F_OFD_SETLK) and the mirror; mu_ held.
  Stat set_locked(FileLocks& f, const Key& k, const LockRequest& r, const sockaddr_storage* peer, bool unlock);
  void drop_if_empty_locked(const Key& k);
  void retry(std::stop_token stop);
  bool retry_file_locked(const Key& k, std::vector<Waiter>& granted);

  const ExportTable& exports_;
  const LockLimits limits_;
  std::function<void(const Waiter&)> on_granted_;
  std::mutex mu_;  // guards files_, use_, dirty_
  std::map<Key, FileLocks> files_;
  std::map<Address, Use> use_;
  std::vector<Key> dirty_;  // files whose waiters may now be granted
  metrics::Gauge& ranges_gauge_;   // nfsrdma_server_lock_ranges: the sum of use_'s ranges
  metrics::Gauge& waiters_gauge_;  // nfsrdma_server_lock_waiters: the sum of use_'s waiters
  std::condition_variable_any cv_;
  std::jthread retrier_;  // last: stops before the rest goes
};

}  // namespace nfsrdma::server
