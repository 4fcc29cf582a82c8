// Mount options as nfs(5) spells them, parsed from `host:/export` and an `-o`
// list. Every option an fstab line may carry is either honoured with nfs(5)'s
// meaning or refused with the reason; none is accepted and ignored. One table
// (mount_option_docs) lists them for --help, the man page and its drift test.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/core/nfs_client.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma::fuse {

enum class LookupCache : std::uint8_t { all, positive, none };

struct MountOptions {
  client::NfsClientOptions nfs;            // host, export, proto, ports, timeo, retrans, hard, resvport, nconnect
  std::uint32_t rsize = 1u << 20;          // the most asked for; FSINFO may lower it
  std::uint32_t wsize = 1u << 20;
  bool read_only = false;
  int acregmin_s = 3, acregmax_s = 60, acdirmin_s = 30, acdirmax_s = 60;
  bool noac = false;
  bool sync = false;                       // each write(2) is stable on the server before it returns
  bool cto = true;                         // close-to-open: open checks the file for changes by others
  bool rdirplus = true;                    // READDIRPLUS for listings (READDIR with nordirplus)
  LookupCache lookupcache = LookupCache::all;
  bool local_posix_locks = false;          // fcntl/lockf locks kept on this client (else NLM, the server's)
  bool local_flock_locks = false;          // flock(2) locks kept on this client (else NLM, whole-file)
  bool background = false;                 // bg: retry a failed mount in the background
  int retry_min = -1;                      // minutes to keep trying; -1: nfs(5)'s 2 (fg) or 10000 (bg)
  std::vector<std::string> fuse_args;      // handed to libfuse as -o NAME (VFS flags, allow_other...)
  std::optional<std::uint64_t> atime;      // MOUNT_ATTR_NOATIME, _RELATIME or _STRICTATIME, set after mounting
  std::optional<bool> nodiratime;          // libfuse passes neither; main() sets them with mount_setattr
  std::string metrics;                     // HOST:PORT for Prometheus metrics, empty for none
  std::string mountpoint;                  // not an option: names this mount as a lock client
  bool transport_given = false;            // proto=, rdma, tcp or provider= was given (choose_transport)

  // Settles proto and provider: what was given, else RPC-over-RDMA where an
  // RDMA device is present and TCP where none is (libfabric's tcp provider,
  // which carries RPC-over-RDMA over TCP, is slower than TCP itself). Returns
  // the choice and the reason, in one line for the log.
  std::string choose_transport();
  bool writes_sync() const { return sync || noac; }  // nfs(5): noac makes writes synchronous too
  int retry_minutes() const { return retry_min >= 0 ? retry_min : background ? 10000 : 2; }
};

// `source` is host:/export ([v6addr]:/export for IPv6); `options` a comma
// separated list. An option refused or unknown is an error naming it.
Result<MountOptions> parse_mount(std::string_view source, std::string_view options, MountOptions base = {});

// The -o list back, as /proc/mounts and `nfsrdma-stat` would show it.
std::string describe(const MountOptions& o);

// Every option parse_mount knows: its spelling (`name`, `name=VALUE`) and what
// it does, one line each, in the order --help and nfsrdma-fuse(8) give them.
struct OptionDoc {
  std::string_view spelling;
  std::string_view help;
};
std::span<const OptionDoc> mount_option_docs();

}  // namespace nfsrdma::fuse
