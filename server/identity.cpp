#include "server/identity.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"

namespace nfsrdma::server {
namespace {

// What the calling thread runs as right now; empty after a failed switch.
// Threads start as root.
thread_local std::optional<Credentials> current = Credentials{};

bool failed(const char* call, const Credentials& c, int err) {
  static metrics::Counter& failures = metrics::registry().counter(
      "nfsrdma_server_identity_failures_total", "Calls failed because switching to the caller's identity failed");
  static std::atomic<bool> logged{false};
  failures.inc();
  current.reset();
  if (!logged.exchange(true)) {
    spdlog::error("identity: {} for uid {} gid {} failed: {}; such calls fail with SERVERFAULT (logged once)", call,
                  c.uid, c.gid, std::strerror(err));
  }
  return false;
}

}  // namespace

bool Credentials::operator==(const Credentials& o) const {
  return uid == o.uid && gid == o.gid && ngroups == o.ngroups &&
         std::equal(groups.begin(), groups.begin() + ngroups, o.groups.begin());
}

Credentials squash(const Credentials& caller, bool anonymous, const ExportOptions& o) {
  Credentials c = caller;
  if (anonymous || o.squash == Squash::all) {
    c.uid = o.anonuid;
    c.gid = o.anongid;
    c.ngroups = 0;
    return c;
  }
  if (o.squash == Squash::root) {
    if (c.uid == 0) c.uid = o.anonuid;
    if (c.gid == 0) c.gid = o.anongid;
    for (std::uint32_t i = 0; i < c.ngroups; ++i) {
      if (c.groups[i] == 0) c.groups[i] = o.anongid;
    }
  }
  return c;
}

bool become(const Credentials& c) {
  if (current && c == *current) return true;
  // ORDER: groups and gid first; fsuid last, because leaving fsuid 0 drops the
  // capabilities setgroups needs (CAP_SETGID).
  gid_t groups[16];
  for (std::uint32_t i = 0; i < c.ngroups; ++i) groups[i] = c.groups[i];
  if (syscall(SYS_setgroups, c.ngroups, groups) != 0) return failed("setgroups", c, errno);
  // setfsgid/setfsuid return the previous id and report no error; asking with
  // an invalid id (-1) changes nothing and returns the current one.
  syscall(SYS_setfsgid, c.gid);
  if (static_cast<std::uint32_t>(syscall(SYS_setfsgid, -1)) != c.gid) return failed("setfsgid", c, EPERM);
  syscall(SYS_setfsuid, c.uid);
  if (static_cast<std::uint32_t>(syscall(SYS_setfsuid, -1)) != c.uid) return failed("setfsuid", c, EPERM);
  current = c;
  return true;
}

bool become_root() { return become(Credentials{}); }

}  // namespace nfsrdma::server
