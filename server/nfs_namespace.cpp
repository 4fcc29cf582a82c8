// NFSv3 procedures that change a directory: CREATE, MKDIR, SYMLINK, MKNOD,
// REMOVE, RMDIR, RENAME, LINK. All run as the caller (see identity.hpp), so
// ownership, permission and sticky-bit rules are the kernel's.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "server/nfs_service.hpp"

namespace nfsrdma::server {

using namespace nfs3;

namespace {

bool is_dot_or_dotdot(const std::string& n) { return n == "." || n == ".."; }

// A file whose blocks take this much is not freed, or written out, on a
// transport's thread.
constexpr std::uint64_t kInlineFreeMax = 1 << 20;

bool large(const struct stat& st) { return static_cast<std::uint64_t>(st.st_blocks) * 512 > kInlineFreeMax; }

// `name` in `dirfd` is the last link of a large file: removing or replacing
// it frees its blocks.
bool frees_much(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
         large(st);
}

// EXCLUSIVE create keeps the client's verifier in the new file's atime and
// mtime seconds, as nfsd does, so a retransmitted CREATE finds it (RFC 1813
// §3.3.8); the client then sets the real times with SETATTR.
void verifier_times(const verf8& v, timespec out[2]) {
  auto word = [&](int at) {
    return static_cast<time_t>((std::uint32_t{v[at]} << 24) | (std::uint32_t{v[at + 1]} << 16) |
                               (std::uint32_t{v[at + 2]} << 8) | v[at + 3]);
  };
  out[0] = {word(0), 0};
  out[1] = {word(4), 0};
}

}  // namespace

nfsstat3 NfsService::finish_create(const CallContext& ctx, Object& dir, const std::string& name,
                                   const sattr3& attrs, CreateRes& res) {
  Object child{dir.ex, dir.opts, ObjectFd(Fd(::openat(dir.fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)))};
  nfsstat3 s = NFS3_OK;
  if (!child.fd.valid()) {
    s = errno_to_nfsstat3(errno);
  } else {
    s = apply_sattr(child, attrs, identity(ctx, dir));
    if (s == NFS3_OK) s = commit_change(ctx, child);
    if (s == NFS3_OK) s = commit_change(ctx, dir);
    nfs_fh3 fh;
    if (handle_of(exports_, *dir.ex, child.fd.get(), fh) == NFS3_OK) res.obj = fh;
    res.obj_attributes = post_op(child);
    if (s == NFS3_OK && res.obj) keep_open(fh, child);  // its SETATTRs (mode, times, owner) run inline
  }
  res.dir_wcc.after = post_op(dir);
  return s;
}

template <class Make>
nfsstat3 NfsService::make_entry(const CallContext& ctx, const diropargs3& where, const sattr3& attrs, Make make,
                                CreateRes& res) {
  Object dir;
  if (auto s = reach(ctx, where.dir, Need::modify, dir); s != NFS3_OK) return s;
  res.dir_wcc.before = pre_op(dir);
  if (auto s = check_name(where.name); s != NFS3_OK) return s;
  if (is_dot_or_dotdot(where.name)) return NFS3ERR_EXIST;
  if (int err = make(dir.fd.get(), where.name.c_str()); err != 0) {
    res.dir_wcc.after = post_op(dir);
    return errno_to_nfsstat3(err);
  }
  return finish_create(ctx, dir, where.name, attrs, res);
}

nfsstat3 NfsService::do_create(const CallContext& ctx, const CREATE3args& a, CreateRes& res) {
  const sattr3& want = a.obj_attributes;
  // It truncates a file that may exist, as SETATTR's does: a worker's.
  if (!ctx.may_block && a.mode != createmode3::EXCLUSIVE && want.size) return ctx.pass_on();
  mode_t mode = (a.mode != createmode3::EXCLUSIVE && want.mode) ? (*want.mode & 07777) : 0;
  sattr3 rest;  // what mknodat did not already set
  if (a.mode != createmode3::EXCLUSIVE) {
    rest = want;
    rest.mode.reset();
  }
  auto make = [&](int dirfd, const char* name) -> int {
    if (::mknodat(dirfd, name, S_IFREG | mode, 0) == 0) {
      if (a.mode == createmode3::EXCLUSIVE) {
        timespec t[2];
        verifier_times(a.verf, t);
        if (::utimensat(dirfd, name, t, AT_SYMLINK_NOFOLLOW) != 0) return errno;
      }
      return 0;
    }
    if (errno != EEXIST || a.mode == createmode3::GUARDED) return errno;
    struct stat st {};
    if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
    if (!S_ISREG(st.st_mode)) return EEXIST;
    if (a.mode == createmode3::EXCLUSIVE) {
      timespec t[2];
      verifier_times(a.verf, t);
      // The same verifier: our earlier reply was lost and this is the retransmit.
      if (st.st_atim.tv_sec != t[0].tv_sec || st.st_mtim.tv_sec != t[1].tv_sec) return EEXIST;
      return 0;
    }
    return 0;  // UNCHECKED on an existing file: the attributes (size) still apply
  };
  return make_entry(ctx, a.where, rest, make, res);
}

nfsstat3 NfsService::do_mkdir(const CallContext& ctx, const MKDIR3args& a, CreateRes& res) {
  mode_t mode = a.attributes.mode ? (*a.attributes.mode & 07777) : 0;
  sattr3 rest = a.attributes;
  rest.mode.reset();
  return make_entry(ctx, a.where, rest,
                    [&](int dirfd, const char* name) { return ::mkdirat(dirfd, name, mode) == 0 ? 0 : errno; }, res);
}

nfsstat3 NfsService::do_symlink(const CallContext& ctx, const SYMLINK3args& a, CreateRes& res) {
  if (a.symlink_data.empty() || a.symlink_data.find('\0') != std::string::npos) return NFS3ERR_INVAL;
  sattr3 rest = a.symlink_attributes;
  rest.mode.reset();  // symlinks have no mode of their own on Linux
  rest.size.reset();
  return make_entry(ctx, a.where, rest, [&](int dirfd, const char* name) {
    return ::symlinkat(a.symlink_data.c_str(), dirfd, name) == 0 ? 0 : errno;
  }, res);
}

nfsstat3 NfsService::do_mknod(const CallContext& ctx, const MKNOD3args& a, CreateRes& res) {
  mode_t type = 0;
  dev_t dev = 0;
  switch (a.type) {
    case NF3CHR: type = S_IFCHR; dev = makedev(a.spec.specdata1, a.spec.specdata2); break;
    case NF3BLK: type = S_IFBLK; dev = makedev(a.spec.specdata1, a.spec.specdata2); break;
    case NF3SOCK: type = S_IFSOCK; break;
    case NF3FIFO: type = S_IFIFO; break;
    default: return NFS3ERR_BADTYPE;
  }
  mode_t mode = a.attributes.mode ? (*a.attributes.mode & 07777) : 0;
  sattr3 rest = a.attributes;
  rest.mode.reset();
  rest.size.reset();
  return make_entry(ctx, a.where, rest, [&](int dirfd, const char* name) {
    return ::mknodat(dirfd, name, type | mode, dev) == 0 ? 0 : errno;
  }, res);
}

nfsstat3 NfsService::do_remove(const CallContext& ctx, const diropargs3& a, WccRes& r, bool dir_wanted) {
  Object dir;
  if (auto s = reach(ctx, a.dir, Need::modify, dir); s != NFS3_OK) return s;
  r.wcc.before = pre_op(dir);
  nfsstat3 s = check_name(a.name);
  if (s == NFS3_OK && a.name == ".") s = NFS3ERR_INVAL;
  if (s == NFS3_OK && a.name == "..") s = dir_wanted ? NFS3ERR_NOTEMPTY : NFS3ERR_INVAL;
  if (s == NFS3_OK && !ctx.may_block && frees_much(dir.fd.get(), a.name)) return ctx.pass_on();
  nfs_fh3 victim;  // an open file or directory removed is closed now, not when the cache lets it go
  bool known = s == NFS3_OK && files_.size() > 0 &&
               handle_of_child(exports_, *dir.ex, dir.fd.get(), a.name.c_str(), victim) == NFS3_OK;
  if (s == NFS3_OK && ::unlinkat(dir.fd.get(), a.name.c_str(), dir_wanted ? AT_REMOVEDIR : 0) != 0) {
    s = errno_to_nfsstat3(errno);
  }
  if (s == NFS3_OK && known) files_.forget(victim);
  if (s == NFS3_OK) s = commit_change(ctx, dir);
  r.wcc.after = post_op(dir);
  return s;
}

nfsstat3 NfsService::do_rename(const CallContext& ctx, const RENAME3args& a, RENAME3res& r) {
  Object from, to;
  if (auto s = reach(ctx, a.from.dir, Need::modify, from); s != NFS3_OK) return s;
  if (auto s = reach(ctx, a.to.dir, Need::modify, to); s != NFS3_OK) return s;
  if (from.ex != to.ex) return NFS3ERR_XDEV;
  // Reaching `to` may have waited (a worker resolving its handle): `from`'s
  // attributes are taken again, just before the rename, as `to`'s are.
  from.reached.reset();
  r.fromdir_wcc.before = pre_op(from);
  r.todir_wcc.before = pre_op(to);
  nfsstat3 s = check_name(a.from.name);
  if (s == NFS3_OK) s = check_name(a.to.name);
  if (s == NFS3_OK && (is_dot_or_dotdot(a.from.name) || is_dot_or_dotdot(a.to.name))) s = NFS3ERR_INVAL;
  if (s == NFS3_OK && !ctx.may_block) {
    // Replacing a file frees the one replaced, and ext4 starts writing out
    // the one put in its place (auto_da_alloc): both may be large.
    struct stat target {}, source {};
    if (::fstatat(to.fd.get(), a.to.name.c_str(), &target, AT_SYMLINK_NOFOLLOW) == 0 &&
        ((S_ISREG(target.st_mode) && target.st_nlink == 1 && large(target)) ||
         (::fstatat(from.fd.get(), a.from.name.c_str(), &source, AT_SYMLINK_NOFOLLOW) == 0 && large(source)))) {
      return ctx.pass_on();
    }
  }
  nfs_fh3 victim;  // what the rename replaces, as for REMOVE
  bool known = s == NFS3_OK && files_.size() > 0 &&
               handle_of_child(exports_, *to.ex, to.fd.get(), a.to.name.c_str(), victim) == NFS3_OK;
  if (s == NFS3_OK && ::renameat(from.fd.get(), a.from.name.c_str(), to.fd.get(), a.to.name.c_str()) != 0) {
    s = errno_to_nfsstat3(errno);
  }
  if (s == NFS3_OK && known) files_.forget(victim);
  if (s == NFS3_OK) s = commit_change(ctx, to);
  if (s == NFS3_OK && !(a.from.dir == a.to.dir)) s = commit_change(ctx, from);
  r.fromdir_wcc.after = post_op(from);
  r.todir_wcc.after = post_op(to);
  return s;
}

nfsstat3 NfsService::do_link(const CallContext& ctx, const LINK3args& a, LINK3res& r) {
  Object file, dir;
  if (auto s = reach(ctx, a.file, Need::read, file); s != NFS3_OK) return s;
  if (auto s = reach(ctx, a.link.dir, Need::modify, dir); s != NFS3_OK) return s;
  if (file.ex != dir.ex) return NFS3ERR_XDEV;
  r.linkdir_wcc.before = pre_op(dir);
  nfsstat3 s = check_name(a.link.name);
  if (s == NFS3_OK && is_dot_or_dotdot(a.link.name)) s = NFS3ERR_EXIST;
  // Linking an O_PATH descriptor by name needs CAP_DAC_READ_SEARCH with
  // AT_EMPTY_PATH; following its /proc/self/fd link does not, and keeps the
  // kernel's protected_hardlinks checks for the caller.
  if (s == NFS3_OK && ::linkat(AT_FDCWD, ProcPath(file.fd.get()).c_str(), dir.fd.get(), a.link.name.c_str(),
                               AT_SYMLINK_FOLLOW) != 0) {
    s = errno_to_nfsstat3(errno);
  }
  if (s == NFS3_OK) s = commit_change(ctx, dir);
  if (s == NFS3_OK) s = commit_change(ctx, file);
  r.file_attributes = post_op(file);
  r.linkdir_wcc.after = post_op(dir);
  return s;
}

}  // namespace nfsrdma::server
