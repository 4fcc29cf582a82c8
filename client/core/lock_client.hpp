// Network locks for one mount (NLM v4 to the server's lock manager, as the
// kernel client's lockd speaks it for an NFSv3 mount, RDMA or not): LOCK,
// UNLOCK, TEST and CANCEL over a TCP connection of their own, found through
// the server's portmapper at first use and remade when it breaks.
//
// The mount is one lock client, named `caller_name` (the host's name and the
// mount point's hash: two mounts on one host are two clients). Its NSM state
// is the time it started (odd), sent with every LOCK and, at start, in an
// SM_NOTIFY to the server's status monitor: locks an earlier instance of the
// same mount left behind (it was killed) are released.
//
// Every lock granted is recorded here per (file, owner) in a RangeSet. While
// any is held, a monitor thread asks the server's NSM for its state every
// 2 s; when it changed (the server restarted), every lock is reclaimed
// (`reclaim` set) within the server's grace period. A lock that cannot be
// reclaimed marks its file `lost`: I/O on it then fails with EIO, never
// silently unlocked.
//
// A LOCK that must wait is asked again with `block` set, every 100 ms growing
// to 2 s (the server's GRANTED callback is not served here: the next
// request finds the lock granted), until granted or `interrupted()` says the
// caller gave up, which sends CANCEL.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "lib/nfs3/lock_ranges.hpp"
#include "lib/nfs3/nfs3_types.hpp"
#include "lib/nfs3/nlm4.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::client {

struct LockClientOptions {
  std::string host;
  std::string caller_name;
  bool resvport = true;
  int timeout_ms = 10'000;  // per call; a server that does not answer is ENOLCK
  // Called (on the monitor thread) for a file whose lock was lost, so the
  // caller can drop what it caches of it: reads must reach lost() too.
  std::function<void(const nfs3::nfs_fh3&)> on_lost;
};

class LockClient {
 public:
  explicit LockClient(LockClientOptions options);
  ~LockClient();

  struct Owner {
    std::uint64_t id = 0;  // FUSE's lock_owner
    std::int32_t svid = 0;  // the process, as the server shows holders (kept per owner and file)
  };
  struct Holder {
    bool exclusive = false;
    std::int32_t svid = 0;
    std::uint64_t start = 0, end = 0;  // inclusive; nlm4::kEof: to the end
  };

  // 0, EAGAIN (held by another owner), EINTR (interrupted while waiting),
  // ENOLCK (no lock manager, or it refused), ESTALE, EIO.
  int lock(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start, std::uint64_t end, bool wait,
           const std::function<bool()>& interrupted);
  int unlock(const nfs3::nfs_fh3& fh, Owner o, std::uint64_t start, std::uint64_t end);
  // 0 and `holder` empty when free; 0 and the holder when not.
  int test(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start, std::uint64_t end,
           std::optional<Holder>& holder);
  // Whether `owner` holds a lock on `fh`.
  bool holds(const nfs3::nfs_fh3& fh, std::uint64_t owner);
  // Lets go of everything `owner` holds on `fh` (close); nothing held, no call.
  void release(const nfs3::nfs_fh3& fh, std::uint64_t owner);
  // A lock on `fh` was lost in a server restart: I/O on it fails.
  bool lost(const nfs3::nfs_fh3& fh);

 private:
  using Key = std::pair<std::string, std::uint64_t>;  // the handle's bytes, the owner
  struct Held {
    std::int32_t svid = 0;
    nfs3::nfs_fh3 fh;
    nlm4::RangeSet ranges;
  };
  // One NLM call; the result bytes, or an error after which the connection is remade.
  Result<std::vector<std::uint8_t>> call(std::uint32_t prog, std::uint32_t proc, const std::vector<std::uint8_t>& args);
  nlm4::nlm4_lock alock(const nfs3::nfs_fh3& fh, Owner o, std::uint64_t start, std::uint64_t end) const;
  nlm4::nlm4_stats send_lock(const nfs3::nfs_fh3& fh, Owner o, bool exclusive, std::uint64_t start, std::uint64_t end,
                             bool block, bool reclaim, bool& failed);
  void monitor(std::stop_token stop);
  void reclaim_all();
  // ENOLCK, and the first time a log line that says why.
  int no_lock_manager(const std::string& why);

  const LockClientOptions options_;
  const std::int32_t state_;
  std::mutex call_mu_;  // one call at a time on the connections below
  std::unique_ptr<tcp::TcpClient> nlm_, nsm_;
  std::atomic<bool> said_no_nlm_{false};
  std::mutex mu_;  // guards held_, lost_, server_state_
  std::map<Key, Held> held_;
  std::set<std::string> lost_;
  std::atomic<bool> any_lost_{false};  // lost_ is not empty: I/O asks lost()
  std::optional<std::int32_t> server_state_;
  std::condition_variable_any cv_;
  std::jthread monitor_;  // last: stops before the rest goes
};

}  // namespace nfsrdma::client
