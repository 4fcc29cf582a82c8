// Getting to an export: PORTMAP GETPORT (RFC 1833) when a port is not given,
// and MOUNT MNT (RFC 1813 Appendix I) for the root file handle. Both over TCP,
// as RFC 8267 §2 keeps them even when NFS runs over RDMA.
#pragma once

#include <optional>
#include <string>

#include "lib/nfs3/nfs3_types.hpp"
#include "lib/rpc/rpc.hpp"

namespace nfsrdma::client {

// The port `host`'s portmapper has for (prog, vers, TCP); an error if none.
Result<std::uint16_t> portmap_getport(const std::string& host, std::uint32_t prog, std::uint32_t vers);

// Mounts `path`: MNT3ERR_* become clear errors ("access denied by server",
// "no such export"...). `mount_port` 0 asks the portmapper, and tries 20048
// (nfsrdma-server's and the usual mountd port) where none answers. `resvport`:
// from a source port below 1024 when root, as exports marked `secure` want.
Result<nfs3::nfs_fh3> mount_export(const std::string& host, std::uint16_t mount_port, const std::string& path,
                                   const std::optional<rpc::AuthSys>& cred, bool resvport);

}  // namespace nfsrdma::client
