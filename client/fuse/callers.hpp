// Who a FUSE request's calls are for, as AUTH_SYS says it: uid, gid and
// supplementary groups. The kernel gives each request its caller's uid, gid
// and thread id; the groups are only in /proc/TID/status, and reading that
// (fuse_req_getgroups) cost 12 us a request, 18% of the daemon's CPU in a
// `tar -x`. So a thread's groups are kept for a second (kKeep).
//
// What a second's staleness can do. The kernel checks each caller against
// the cached mode and owner with its current groups (default_permissions,
// always on), so the groups sent only let the server check again: stale
// ones can make it refuse, for at most kKeep, what a group just joined
// allows. The server's check stands alone only for a thread the kernel lets
// through by capability (CAP_DAC_OVERRIDE and the like); stale groups could
// let such a thread keep, for kKeep, a group it has just left, which matters
// only once it has also given up CAP_SETGID (with it, it could claim any
// groups: AUTH_SYS trusts the client's root). Changing groups at all takes
// CAP_SETGID, and a thread that changes its uid or gid is a new key, so su,
// sudo and newgrp start afresh. A thread id reused within kKeep by the same
// uid and gid gets its predecessor's groups, under the same rule.
#pragma once

#include <fuse_lowlevel.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "client/core/nfs_client.hpp"

namespace nfsrdma::fuse {

class Callers {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kKeep = std::chrono::seconds(1);
  static constexpr std::size_t kSlots = 64;  // threads remembered at once; a slot is a thread id's, modulo

  // The identity `req`'s calls go out with.
  client::Identity of(fuse_req_t req);
  // The same for thread `tid` as `uid`:`gid` at `now`; `fetch` reads the
  // thread's groups (empty optional: it is gone, and nothing is kept).
  template <class Fetch>
  client::Identity of(std::uint32_t tid, std::uint32_t uid, std::uint32_t gid, Clock::time_point now, Fetch&& fetch) {
    client::Identity id{uid, gid, {}};
    Slot& s = slots_[tid % kSlots];
    {
      std::lock_guard lk(mu_);
      if (s.valid && s.tid == tid && s.uid == uid && s.gid == gid && now - s.read_at < kKeep) {
        id.groups = s.groups;
        return id;
      }
    }
    std::optional<std::vector<std::uint32_t>> groups = fetch();
    if (!groups) return id;
    id.groups = *groups;
    std::lock_guard lk(mu_);
    s = Slot{true, tid, uid, gid, now, std::move(*groups)};
    return id;
  }

 private:
  struct Slot {
    bool valid = false;
    std::uint32_t tid = 0, uid = 0, gid = 0;
    Clock::time_point read_at;
    std::vector<std::uint32_t> groups;
  };
  std::mutex mu_;  // guards slots_
  std::array<Slot, kSlots> slots_;
};

}  // namespace nfsrdma::fuse
