// PORTMAP version 2 (RFC 1833 §3): what clients ask on port 111 to find NFS and MOUNT.
#pragma once

#include <vector>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::portmap2 {

constexpr std::uint32_t kProgram = 100000;
constexpr std::uint32_t kVersion = 2;
constexpr std::uint16_t kPort = 111;
constexpr std::uint32_t IPPROTO_TCP_ = 6;
constexpr std::uint32_t IPPROTO_UDP_ = 17;

enum class Proc : std::uint32_t { NULL_ = 0, SET = 1, UNSET = 2, GETPORT = 3, DUMP = 4, CALLIT = 5 };
const char* proc_name(std::uint32_t proc);

struct mapping {
  std::uint32_t prog = 0, vers = 0, prot = 0, port = 0;
  bool operator==(const mapping&) const = default;
};
struct PmapList { std::vector<mapping> entries; };

template <class X> void codec(X& x, mapping& v) {
  x.u32(v.prog);
  x.u32(v.vers);
  x.u32(v.prot);
  x.u32(v.port);
}
template <class X> void codec(X& x, PmapList& v) { xdr::xdr_list(x, v.entries, 1u << 16); }

}  // namespace nfsrdma::portmap2
