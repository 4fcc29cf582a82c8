#include "server/identity.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace nfsrdma::server {
namespace {

// What the calling thread runs as right now. Threads start as root.
thread_local Credentials current{};

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

void become(const Credentials& c) {
  if (c == current) return;
  // ORDER: groups and gid first; fsuid last, because leaving fsuid 0 drops the
  // capabilities, and these calls themselves need none (they set fs ids only).
  gid_t groups[16];
  for (std::uint32_t i = 0; i < c.ngroups; ++i) groups[i] = c.groups[i];
  syscall(SYS_setgroups, c.ngroups, groups);
  syscall(SYS_setfsgid, c.gid);
  syscall(SYS_setfsuid, c.uid);
  current = c;
}

void become_root() { become(Credentials{}); }

}  // namespace nfsrdma::server
