// Per-thread filesystem identity: each request runs with the caller's fsuid,
// fsgid and supplementary groups, so the kernel itself checks permissions, owns
// new files and clears suid/sgid bits, as with nfsd.
//
// WARNING: only raw syscalls here. glibc's setgroups() changes every thread of
// the process (it broadcasts with SIGSETXID); the raw syscall changes only the
// caller. Changing fsuid away from 0 also drops the filesystem capabilities
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_CHOWN, CAP_FOWNER, CAP_MKNOD...);
// returning to 0 restores them. Handle resolution needs CAP_DAC_READ_SEARCH, so
// it runs as root (become_root()) and the operation then as the caller.
#pragma once

#include <array>
#include <cstdint>

#include "server/exports.hpp"

namespace nfsrdma::server {

struct Credentials {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t ngroups = 0;
  std::array<std::uint32_t, 16> groups{};
  bool operator==(const Credentials& o) const;
};

// The identity a request runs with on an export, after root_squash/all_squash.
// `anonymous` is true for AUTH_NONE calls, which always map to anonuid/anongid.
Credentials squash(const Credentials& caller, bool anonymous, const ExportOptions& options);

// Makes the calling thread act as `c` for filesystem access (no syscall when it
// already does). Every syscall is checked: false means the thread's identity
// is unknown (the next call starts over) and the operation must not go on; it
// fails with NFS3ERR_SERVERFAULT. The first failure is logged at error level,
// every one counted in nfsrdma_server_identity_failures_total.
[[nodiscard]] bool become(const Credentials& c);
[[nodiscard]] bool become_root();

}  // namespace nfsrdma::server
