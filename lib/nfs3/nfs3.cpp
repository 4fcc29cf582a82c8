// Names for logs and the few size computations the server needs.
#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "lib/nfs3/portmap2.hpp"

namespace nfsrdma {

const char* nfs3::proc_name(std::uint32_t proc) {
  static const char* const kNames[kProcCount] = {
      "NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
      "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK",
      "READDIR", "READDIRPLUS", "FSSTAT", "FSINFO", "PATHCONF", "COMMIT"};
  return proc < kProcCount ? kNames[proc] : "?";
}

bool nfs3::counts_as_error(Proc p, std::uint32_t status) {
  return status != 0 && !(p == Proc::LOOKUP && status == static_cast<std::uint32_t>(nfsstat3::NFS3ERR_NOENT));
}

bool nfs3::is_non_idempotent(Proc p) {
  switch (p) {
    case Proc::SETATTR: case Proc::CREATE: case Proc::MKDIR: case Proc::SYMLINK:
    case Proc::MKNOD: case Proc::REMOVE: case Proc::RMDIR: case Proc::RENAME: case Proc::LINK:
      return true;
    default:
      return false;
  }
}

const char* nfs3::nfsstat3_name(nfsstat3 s) {
  switch (s) {
    case NFS3_OK: return "NFS3_OK";
    case NFS3ERR_PERM: return "NFS3ERR_PERM";
    case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
    case NFS3ERR_IO: return "NFS3ERR_IO";
    case NFS3ERR_NXIO: return "NFS3ERR_NXIO";
    case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
    case NFS3ERR_EXIST: return "NFS3ERR_EXIST";
    case NFS3ERR_XDEV: return "NFS3ERR_XDEV";
    case NFS3ERR_NODEV: return "NFS3ERR_NODEV";
    case NFS3ERR_NOTDIR: return "NFS3ERR_NOTDIR";
    case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
    case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
    case NFS3ERR_FBIG: return "NFS3ERR_FBIG";
    case NFS3ERR_NOSPC: return "NFS3ERR_NOSPC";
    case NFS3ERR_ROFS: return "NFS3ERR_ROFS";
    case NFS3ERR_MLINK: return "NFS3ERR_MLINK";
    case NFS3ERR_NAMETOOLONG: return "NFS3ERR_NAMETOOLONG";
    case NFS3ERR_NOTEMPTY: return "NFS3ERR_NOTEMPTY";
    case NFS3ERR_DQUOT: return "NFS3ERR_DQUOT";
    case NFS3ERR_STALE: return "NFS3ERR_STALE";
    case NFS3ERR_REMOTE: return "NFS3ERR_REMOTE";
    case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
    case NFS3ERR_NOT_SYNC: return "NFS3ERR_NOT_SYNC";
    case NFS3ERR_BAD_COOKIE: return "NFS3ERR_BAD_COOKIE";
    case NFS3ERR_NOTSUPP: return "NFS3ERR_NOTSUPP";
    case NFS3ERR_TOOSMALL: return "NFS3ERR_TOOSMALL";
    case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
    case NFS3ERR_BADTYPE: return "NFS3ERR_BADTYPE";
    case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
  }
  return "NFS3ERR_?";
}

namespace {
constexpr std::size_t kFattr3Bytes = 84;
std::size_t opt_fh_size(const nfs3::post_op_fh3& fh) { return 4 + (fh ? 4 + xdr::pad4(fh->len) : 0); }
}  // namespace

// value_follows + fileid + name + cookie
std::size_t nfs3::encoded_size(const entry3& e) { return 4 + 8 + 4 + xdr::pad4(e.name.size()) + 8; }

std::size_t nfs3::encoded_size(const entryplus3& e) {
  return 4 + 8 + 4 + xdr::pad4(e.name.size()) + 8 + 4 + (e.name_attributes ? kFattr3Bytes : 0) +
         opt_fh_size(e.name_handle);
}

std::size_t nfs3::dircount_size(const entryplus3& e) { return 8 + 4 + xdr::pad4(e.name.size()) + 8; }

const char* mount3::proc_name(std::uint32_t proc) {
  static const char* const kNames[] = {"NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"};
  return proc < 6 ? kNames[proc] : "?";
}

const char* portmap2::proc_name(std::uint32_t proc) {
  static const char* const kNames[] = {"NULL", "SET", "UNSET", "GETPORT", "DUMP", "CALLIT"};
  return proc < 6 ? kNames[proc] : "?";
}

const char* nlm4::proc_name(std::uint32_t proc) {
  static const char* const kNames[kProcCount] = {
      "NULL", "TEST", "LOCK", "CANCEL", "UNLOCK", "GRANTED", "TEST_MSG", "LOCK_MSG", "CANCEL_MSG", "UNLOCK_MSG",
      "GRANTED_MSG", "TEST_RES", "LOCK_RES", "CANCEL_RES", "UNLOCK_RES", "GRANTED_RES", "?", "?", "?", "?",
      "SHARE", "UNSHARE", "NM_LOCK", "FREE_ALL"};
  return proc < kProcCount ? kNames[proc] : "?";
}

const char* nlm4::stat_name(nlm4_stats s) {
  static const char* const kNames[] = {"NLM4_GRANTED", "NLM4_DENIED", "NLM4_DENIED_NOLOCKS", "NLM4_BLOCKED",
                                       "NLM4_DENIED_GRACE_PERIOD", "NLM4_DEADLCK", "NLM4_ROFS", "NLM4_STALE_FH",
                                       "NLM4_FBIG", "NLM4_FAILED"};
  auto i = static_cast<std::uint32_t>(s);
  return i < 10 ? kNames[i] : "?";
}

const char* nsm1::proc_name(std::uint32_t proc) {
  static const char* const kNames[kProcCount] = {"NULL", "STAT", "MON", "UNMON", "UNMON_ALL", "SIMU_CRASH", "NOTIFY"};
  return proc < kProcCount ? kNames[proc] : "?";
}

}  // namespace nfsrdma
