// Mount options as mount.nfs(5) spells them, parsed from `host:/export` and an
// `-o` list, plus the few FUSE options passed through to the kernel.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "client/core/nfs_client.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma::fuse {

struct MountOptions {
  client::NfsClientOptions nfs;            // host, export, proto, ports, timeo, retrans, hard, nconnect
  std::uint32_t rsize = 1u << 20;          // the most asked for; FSINFO may lower it
  std::uint32_t wsize = 1u << 20;
  bool read_only = false;
  int acregmin_s = 3, acregmax_s = 60, acdirmin_s = 30, acdirmax_s = 60;
  bool noac = false;
  std::vector<std::string> fuse_args;      // handed to libfuse as -o NAME
  std::string metrics;                     // HOST:PORT for Prometheus metrics, empty for none
};

// `source` is host:/export ([v6addr]:/export for IPv6); `options` a comma
// separated list. Options mount(8) adds on its own (rw, dev, suid, _netdev,
// defaults...) are accepted; an unknown option is an error naming it.
Result<MountOptions> parse_mount(std::string_view source, std::string_view options, MountOptions base = {});

// The -o list back, as /proc/mounts and `nfsrdma-stat` would show it.
std::string describe(const MountOptions& o);

}  // namespace nfsrdma::fuse
