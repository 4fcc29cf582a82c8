#include "client/core/errno_map.hpp"

#include <cerrno>

namespace nfsrdma::client {

using namespace nfs3;

int nfsstat3_to_errno(nfsstat3 s) {
  switch (s) {
    case NFS3_OK: return 0;
    case NFS3ERR_PERM: return EPERM;
    case NFS3ERR_NOENT: return ENOENT;
    case NFS3ERR_IO: return EIO;
    case NFS3ERR_NXIO: return ENXIO;
    case NFS3ERR_ACCES: return EACCES;
    case NFS3ERR_EXIST: return EEXIST;
    case NFS3ERR_XDEV: return EXDEV;
    case NFS3ERR_NODEV: return ENODEV;
    case NFS3ERR_NOTDIR: return ENOTDIR;
    case NFS3ERR_ISDIR: return EISDIR;
    case NFS3ERR_INVAL: return EINVAL;
    case NFS3ERR_FBIG: return EFBIG;
    case NFS3ERR_NOSPC: return ENOSPC;
    case NFS3ERR_ROFS: return EROFS;
    case NFS3ERR_MLINK: return EMLINK;
    case NFS3ERR_NAMETOOLONG: return ENAMETOOLONG;
    case NFS3ERR_NOTEMPTY: return ENOTEMPTY;
    case NFS3ERR_DQUOT: return EDQUOT;
    case NFS3ERR_STALE: return ESTALE;
    case NFS3ERR_REMOTE: return EREMOTE;
    case NFS3ERR_BADHANDLE: return EBADF;
    case NFS3ERR_NOT_SYNC: return EAGAIN;
    case NFS3ERR_BAD_COOKIE: return EINVAL;
    case NFS3ERR_NOTSUPP: return EOPNOTSUPP;
    case NFS3ERR_TOOSMALL: return EINVAL;
    case NFS3ERR_SERVERFAULT: return EIO;
    case NFS3ERR_BADTYPE: return EINVAL;
    case NFS3ERR_JUKEBOX: return EAGAIN;
  }
  return EIO;
}

}  // namespace nfsrdma::client
