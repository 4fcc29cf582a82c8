// nfsstat3 -> errno: the one place NFS status becomes an errno (STYLE.md),
// shared by the FUSE client and the fio engine.
#pragma once

#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::client {

int nfsstat3_to_errno(nfs3::nfsstat3 s);

}  // namespace nfsrdma::client
