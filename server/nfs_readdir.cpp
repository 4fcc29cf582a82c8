// READDIR and READDIRPLUS (RFC 1813 §3.3.16-17).
//
// Cookies are the d_off values getdents64 returns: the position after an
// entry, which the kernel accepts back through lseek, stable across server
// restarts on the filesystems we serve (ext4 hashes, xfs, btrfs, tmpfs offsets).
// The cookie verifier is the directory's mtime when the reply was built. As
// with Linux nfsd we do not refuse an old verifier: a d_off cookie stays a valid
// position after the directory changes, and refusing it would make every
// client listing a directory that is being modified (rm -rf) start over.
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/nfs_service.hpp"

namespace nfsrdma::server {

using namespace nfs3;

namespace {

// Fixed reply overhead: status, post_op_attr with attributes, verifier, the
// list's closing FALSE, and eof.
constexpr std::size_t kReplyOverhead = 4 + 4 + 84 + 8 + 4 + 4;

struct DirEntry {
  std::uint64_t ino;
  std::uint64_t next_cookie;
  const char* name;
};

// Walks a directory from `cookie` with getdents64, calling fn(entry) until it
// returns false or the directory ends. Returns errno, 0 on success; `eof` says
// whether the directory was exhausted.
template <class Fn>
int walk_dir(int fd, std::uint64_t cookie, bool& eof, Fn&& fn) {
  if (::lseek(fd, static_cast<off_t>(cookie), SEEK_SET) < 0) return errno;
  alignas(8) char buf[32 * 1024];
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0) return errno;
    if (n == 0) {
      eof = true;
      return 0;
    }
    for (long at = 0; at < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + at);
      at += d->d_reclen;
      if (!fn(DirEntry{d->d_ino, static_cast<std::uint64_t>(d->d_off), d->d_name})) {
        eof = false;
        return 0;
      }
    }
  }
}

verf8 cookie_verifier(const struct stat& st) {
  verf8 v{};
  std::uint64_t t = (static_cast<std::uint64_t>(st.st_mtim.tv_sec) << 30) ^ static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<std::uint8_t>(t >> (56 - 8 * i));
  return v;
}

}  // namespace

nfsstat3 NfsService::open_listing(const CallContext& ctx, const nfs_fh3& fh, Object& dir, Fd& f, struct stat& st,
                                  post_op_attr& attrs, verf8& verifier) {
  if (auto s = access(ctx, fh, Need::read, dir); s != NFS3_OK) return s;
  if (stat_fd(dir.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  attrs = to_fattr3(st, *dir.ex);
  if (!S_ISDIR(st.st_mode)) return NFS3ERR_NOTDIR;
  f = Fd(::open(ProcPath(dir.fd.get()).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!f.valid()) return errno_to_nfsstat3(errno);
  verifier = cookie_verifier(st);
  return NFS3_OK;
}

nfsstat3 NfsService::do_readdir(const CallContext& ctx, const READDIR3args& a, READDIR3res& r) {
  Object dir;
  Fd f;
  struct stat st {};
  if (auto s = open_listing(ctx, a.dir, dir, f, st, r.dir_attributes, r.cookieverf); s != NFS3_OK) return s;
  const bool at_root = is_export_root(*dir.ex, st);
  std::size_t used = kReplyOverhead;
  const std::size_t budget = std::min<std::size_t>(a.count, limits_.rtmax);
  int err = walk_dir(f.get(), a.cookie, r.eof, [&](const DirEntry& d) {
    entry3 e{d.ino, d.name, d.next_cookie};
    if (at_root && e.name == "..") e.fileid = dir.ex->root_ino;
    std::size_t need = encoded_size(e);
    if (used + need > budget) return false;
    used += need;
    r.entries.push_back(std::move(e));
    return true;
  });
  if (err != 0) return errno_to_nfsstat3(err);
  if (r.entries.empty() && !r.eof) return NFS3ERR_TOOSMALL;
  return NFS3_OK;
}

nfsstat3 NfsService::do_readdirplus(const CallContext& ctx, const READDIRPLUS3args& a, READDIRPLUS3res& r) {
  Object dir;
  Fd f;
  struct stat st {};
  if (auto s = open_listing(ctx, a.dir, dir, f, st, r.dir_attributes, r.cookieverf); s != NFS3_OK) return s;
  const bool at_root = is_export_root(*dir.ex, st);
  std::size_t used = kReplyOverhead, dir_used = 0;
  const std::size_t budget = std::min<std::size_t>(a.maxcount, limits_.rtmax);
  int err = walk_dir(f.get(), a.cookie, r.eof, [&](const DirEntry& d) {
    entryplus3 e;
    e.fileid = d.ino;
    e.name = d.name;
    e.cookie = d.next_cookie;
    const char* component = (at_root && e.name == "..") ? "." : d.name;
    struct stat cst {};
    if (::fstatat(dir.fd.get(), component, &cst, AT_SYMLINK_NOFOLLOW) == 0) {
      e.fileid = cst.st_ino;
      e.name_attributes = to_fattr3(cst, *dir.ex);
      nfs_fh3 fh;
      if (handle_of_child(exports_, *dir.ex, dir.fd.get(), component, fh) == NFS3_OK) e.name_handle = fh;
    }
    // Entries that vanished since getdents are listed without attributes.
    std::size_t need = encoded_size(e);
    std::size_t dneed = dircount_size(e);
    if (used + need > budget || dir_used + dneed > a.dircount) return false;
    used += need;
    dir_used += dneed;
    r.entries.push_back(std::move(e));
    return true;
  });
  if (err != 0) return errno_to_nfsstat3(err);
  if (r.entries.empty() && !r.eof) return NFS3ERR_TOOSMALL;
  return NFS3_OK;
}

}  // namespace nfsrdma::server
