// NFSv3 dispatch, the access step every procedure starts with, and the
// attribute and lookup procedures.
#include "server/nfs_service.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>

#include "lib/base/clock.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"

namespace nfsrdma::server {

using namespace nfs3;

namespace {

template <class Args, class Res, class Fn>
rpc::AcceptStat run(xdr::Decoder& in, xdr::Encoder& out, Fn&& fn) {
  Args args;
  codec(in, args);
  if (!in.ok()) return rpc::AcceptStat::garbage_args;
  Res res;
  res.status = fn(args, res);
  codec(out, res);
  return rpc::AcceptStat::success;
}

// An inline call that slept and took this long sends the calls that may
// sleep to workers for kInlinePause.
constexpr std::chrono::milliseconds kSlowInline{2};
constexpr std::chrono::seconds kInlinePause{1};

// `o` borrows a cache entry's O_PATH descriptor, which the entry pins.
void borrow_path(ObjectFd& o, std::shared_ptr<const OpenFiles::File> f) {
  const int fd = f->path.get();
  o.borrow(std::move(f), fd);
}

}  // namespace

std::size_t NfsService::result_bound(std::uint32_t proc, xdr::Decoder& in) const {
  constexpr std::size_t kFixed = 1024;  // the largest fixed-size result (RENAME's two wcc_data) and then some
  auto counted = [&](auto args, auto count) {
    codec(in, args);
    return kFixed + (in.ok() ? std::min<std::size_t>(count(args), limits_.rtmax) : 0);
  };
  switch (static_cast<Proc>(proc)) {
    case Proc::READ: return counted(READ3args{}, [](const auto& a) { return a.count; });
    case Proc::READDIR: return counted(READDIR3args{}, [](const auto& a) { return a.count; });
    case Proc::READDIRPLUS: return counted(READDIRPLUS3args{}, [](const auto& a) { return a.maxcount; });
    case Proc::READLINK: return kFixed + PATH_MAX;
    default: return kFixed;
  }
}

rpc::AcceptStat NfsService::handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in, xdr::Encoder& out,
                                   rpc::ReplyMessage& reply) {
  using P = Proc;
  auto self = this;
  // A change run on a transport's thread is timed (inline_end).
  auto change = [&](auto&& go) {
    if (ctx.may_block) return go();
    const InlineStart started = inline_start();
    const rpc::AcceptStat st = go();
    if (!ctx.would_block) inline_end(started, proc_name(proc));
    return st;
  };
  switch (static_cast<P>(proc)) {
    case P::NULL_: return rpc::AcceptStat::success;
    case P::GETATTR: return run<FhArgs, GETATTR3res>(in, out, [&](auto& a, auto& r) { return self->do_getattr(ctx, a, r); });
    case P::SETATTR: return change([&] { return run<SETATTR3args, WccRes>(in, out, [&](auto& a, auto& r) { return self->do_setattr(ctx, a, r); }); });
    case P::LOOKUP: return run<diropargs3, LOOKUP3res>(in, out, [&](auto& a, auto& r) { return self->do_lookup(ctx, a, r); });
    case P::ACCESS: return run<ACCESS3args, ACCESS3res>(in, out, [&](auto& a, auto& r) { return self->do_access(ctx, a, r); });
    case P::READLINK: return run<FhArgs, READLINK3res>(in, out, [&](auto& a, auto& r) { return self->do_readlink(ctx, a, r); });
    case P::READ: {
      READ3args args;
      codec(in, args);
      if (!in.ok()) return rpc::AcceptStat::garbage_args;
      do_read(ctx, args, out, reply);
      return rpc::AcceptStat::success;
    }
    case P::WRITE: return run<WRITE3args, WRITE3res>(in, out, [&](auto& a, auto& r) { return self->do_write(ctx, a, r); });
    case P::CREATE: return change([&] { return run<CREATE3args, CreateRes>(in, out, [&](auto& a, auto& r) { return self->do_create(ctx, a, r); }); });
    case P::MKDIR: return change([&] { return run<MKDIR3args, CreateRes>(in, out, [&](auto& a, auto& r) { return self->do_mkdir(ctx, a, r); }); });
    case P::SYMLINK: return change([&] { return run<SYMLINK3args, CreateRes>(in, out, [&](auto& a, auto& r) { return self->do_symlink(ctx, a, r); }); });
    case P::MKNOD: return change([&] { return run<MKNOD3args, CreateRes>(in, out, [&](auto& a, auto& r) { return self->do_mknod(ctx, a, r); }); });
    case P::REMOVE: return change([&] { return run<diropargs3, WccRes>(in, out, [&](auto& a, auto& r) { return self->do_remove(ctx, a, r, false); }); });
    case P::RMDIR: return change([&] { return run<diropargs3, WccRes>(in, out, [&](auto& a, auto& r) { return self->do_remove(ctx, a, r, true); }); });
    case P::RENAME: return change([&] { return run<RENAME3args, RENAME3res>(in, out, [&](auto& a, auto& r) { return self->do_rename(ctx, a, r); }); });
    case P::LINK: return change([&] { return run<LINK3args, LINK3res>(in, out, [&](auto& a, auto& r) { return self->do_link(ctx, a, r); }); });
    case P::READDIR: return run<READDIR3args, READDIR3res>(in, out, [&](auto& a, auto& r) { return self->do_readdir(ctx, a, r); });
    case P::READDIRPLUS: return run<READDIRPLUS3args, READDIRPLUS3res>(in, out, [&](auto& a, auto& r) { return self->do_readdirplus(ctx, a, r); });
    case P::FSSTAT: return run<FhArgs, FSSTAT3res>(in, out, [&](auto& a, auto& r) { return self->do_fsstat(ctx, a, r); });
    case P::FSINFO: return run<FhArgs, FSINFO3res>(in, out, [&](auto& a, auto& r) { return self->do_fsinfo(ctx, a, r); });
    case P::PATHCONF: return run<FhArgs, PATHCONF3res>(in, out, [&](auto& a, auto& r) { return self->do_pathconf(ctx, a, r); });
    case P::COMMIT: return run<COMMIT3args, COMMIT3res>(in, out, [&](auto& a, auto& r) { return self->do_commit(ctx, a, r); });
  }
  return rpc::AcceptStat::proc_unavail;
}

nfsstat3 NfsService::access(const CallContext& ctx, const nfs_fh3& fh, Need need, Object& out) const {
  if (!become_root()) return NFS3ERR_SERVERFAULT;
  if (auto s = open_handle(exports_, fh, out); s != NFS3_OK) return s;
  return admit(ctx, need, out);
}

nfsstat3 NfsService::admit(const CallContext& ctx, Need need, Object& o) const {
  o.opts = o.ex->entry().options_for(ctx.peer.addr);
  if (!o.opts) {
    NFSRDMA_LOG_LIMITED(info, "nfs: {} is not allowed to use export {}", ctx.peer.describe(), o.ex->entry().path);
    return NFS3ERR_ACCES;
  }
  if (o.opts->secure && !ctx.secure) {
    NFSRDMA_LOG_LIMITED(info, "nfs: request from {} refused: insecure source port (export {} is 'secure')", ctx.peer.describe(),
                 o.ex->entry().path);
    return NFS3ERR_PERM;
  }
  if (need == Need::modify && !o.opts->rw) return NFS3ERR_ROFS;
  return become(identity(ctx, o)) ? NFS3_OK : NFS3ERR_SERVERFAULT;
}

Credentials NfsService::identity(const CallContext& ctx, const Object& o) const {
  return squash(ctx.caller, ctx.anonymous, *o.opts);
}

nfsstat3 NfsService::held_open(const CallContext& ctx, const nfs_fh3& fh, Object& o,
                               std::shared_ptr<const OpenFiles::File>& f, struct stat& st,
                               std::optional<OpenFiles::Use> use, Need need) {
  f = use ? files_.get(fh, *use) : files_.peek(fh, need == Need::modify);  // a change keeps it open longer
  if (f) o.ex = exports_.by_id(f->export_id);
  if (!f || !o.ex || stat_fd(f->path.get(), st) != 0 || st.st_nlink == 0) return ctx.pass_on();
  return admit(ctx, need, o);
}

nfsstat3 NfsService::reach(const CallContext& ctx, const nfs_fh3& fh, Need need, Object& out) {
  if (ctx.may_block) {
    if (auto s = access(ctx, fh, need, out); s != NFS3_OK) return s;
    struct stat st {};
    if (stat_fd(out.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
    if (st.st_nlink == 0) {
      files_.forget(fh);  // removed, and found only because files_ holds it: stale, as it would be without
      return NFS3ERR_STALE;
    }
    out.reached = st;
    if (S_ISDIR(st.st_mode)) keep_open(fh, out);
    return NFS3_OK;
  }
  std::shared_ptr<const OpenFiles::File> f;
  struct stat st {};
  if (!inline_paused()) {
    // Its error, or JUKEBOX with would_block set if it is not held open.
    if (auto s = held_open(ctx, fh, out, f, st, std::nullopt, need); s != NFS3_OK) return s;
    if (!out.opts->sync || out.ex->in_memory) {
      out.reached = st;
      borrow_path(out.fd, std::move(f));
      return NFS3_OK;
    }
  }
  return ctx.pass_on();
}

nfsstat3 NfsService::commit_change(const CallContext& ctx, const Object& o) const {
  if (!o.opts->sync || o.ex->in_memory || !o.fd.valid()) return NFS3_OK;
  struct stat st {};
  if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return NFS3_OK;  // see the header
  const Credentials who = identity(ctx, o);
  if (!become_root()) return NFS3ERR_SERVERFAULT;
  // O_NONBLOCK: a lease another process holds does not make this wait.
  const int flags = (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  Fd f(::open(ProcPath(o.fd.get()).c_str(), flags));
  const int rc = f.valid() ? ::fsync(f.get()) : -1;
  const int err = errno;
  if (!become(who)) return NFS3ERR_SERVERFAULT;
  if (rc != 0) {
    // The change was made: IO, never a status that says to try it again.
    NFSRDMA_LOG_LIMITED(warn, "nfs: committing a change on export {}: {}", o.ex->entry().path, std::strerror(err));
    return NFS3ERR_IO;
  }
  static metrics::Counter& commits = metrics::registry().counter(
      "nfsrdma_server_change_commits_total",
      "Directories and files a change on a sync export committed to stable storage before its reply");
  commits.inc();
  return NFS3_OK;
}

void NfsService::keep_open(const nfs_fh3& fh, Object& o) {
  if (!o.fd.owned() || files_.peek(fh)) return;
  borrow_path(o.fd, files_.put(fh, OpenFiles::Use::path, {o.ex->id, o.fd.release(), {}}));
}

bool NfsService::inline_paused() const { return steady_ns() < inline_from_ns_.load(std::memory_order_relaxed); }

NfsService::InlineStart NfsService::inline_start() const {
  rusage ru {};
  ::getrusage(RUSAGE_THREAD, &ru);
  return {steady_ns(), ru.ru_nvcsw};
}

void NfsService::inline_end(const InlineStart& start, const char* what) {
  // Slow because it slept (dirty-page throttling, a journal handle, a disk
  // read, a lock held), not because the thread was preempted on a busy
  // machine, which handing calls to more threads would only make worse.
  const std::int64_t took = steady_ns() - start.ns;
  if (took <= std::chrono::nanoseconds(kSlowInline).count()) return;
  rusage now {};
  if (::getrusage(RUSAGE_THREAD, &now) != 0 || now.ru_nvcsw == start.slept) return;
  inline_from_ns_.store(steady_ns() + std::chrono::nanoseconds(kInlinePause).count(), std::memory_order_relaxed);
  NFSRDMA_LOG_LIMITED(info, "nfs: a {} took {} µs on a transport's thread; WRITEs, changes, opens and LOOKUPs past the dentry cache go to workers for {} s",
                      what, took / 1000, kInlinePause.count());
}

nfsstat3 NfsService::do_getattr(const CallContext& ctx, const FhArgs& a, GETATTR3res& r) {
  Object o;
  struct stat st {};
  if (!ctx.may_block) {
    std::shared_ptr<const OpenFiles::File> f;
    if (auto s = held_open(ctx, a.object, o, f, st); s != NFS3_OK) return s;
  } else {
    if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
    if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  }
  r.obj_attributes = to_fattr3(st, *o.ex);
  return NFS3_OK;
}

nfsstat3 apply_sattr(const Object& o, const sattr3& attrs, const Credentials& who) {
  ProcPath path(o.fd.get());
  if (attrs.size) {
    struct stat st {};
    if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
    if (S_ISDIR(st.st_mode)) return NFS3ERR_ISDIR;
    if (!S_ISREG(st.st_mode)) return NFS3ERR_INVAL;
    Fd f(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK));
    if (!f.valid() && errno == EACCES && st.st_uid == who.uid) {
      // Owner override, as for WRITE (see io_file).
      if (!become_root()) return NFS3ERR_SERVERFAULT;
      f = Fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK));
      int err = errno;
      if (!become(who)) return NFS3ERR_SERVERFAULT;
      errno = err;
    }
    if (!f.valid()) return errno_to_nfsstat3(errno);
    if (::ftruncate(f.get(), static_cast<off_t>(*attrs.size)) != 0) return errno_to_nfsstat3(errno);
  }
  if (attrs.uid || attrs.gid) {
    uid_t uid = attrs.uid ? *attrs.uid : static_cast<uid_t>(-1);
    gid_t gid = attrs.gid ? *attrs.gid : static_cast<gid_t>(-1);
    if (::fchownat(o.fd.get(), "", uid, gid, AT_EMPTY_PATH) != 0) return errno_to_nfsstat3(errno);
  }
  if (attrs.mode) {
    if (::fchmodat(AT_FDCWD, path.c_str(), *attrs.mode & 07777, 0) != 0) return errno_to_nfsstat3(errno);
  }
  if (attrs.atime.how != time_how::DONT_CHANGE || attrs.mtime.how != time_how::DONT_CHANGE) {
    auto ts = [](const set_time& t) {
      timespec v{};
      if (t.how == time_how::DONT_CHANGE) v.tv_nsec = UTIME_OMIT;
      else if (t.how == time_how::SET_TO_SERVER_TIME) v.tv_nsec = UTIME_NOW;
      else v = {static_cast<time_t>(t.time.seconds), static_cast<long>(t.time.nseconds)};
      return v;
    };
    timespec times[2] = {ts(attrs.atime), ts(attrs.mtime)};
    if (::utimensat(o.fd.get(), "", times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != EINVAL || ::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) return errno_to_nfsstat3(errno);
    }
  }
  return NFS3_OK;
}

nfsstat3 NfsService::do_setattr(const CallContext& ctx, const SETATTR3args& a, WccRes& r) {
  if (!ctx.may_block && a.new_attributes.size) return ctx.pass_on();  // a truncate may free a whole file's blocks
  Object o;
  if (auto s = reach(ctx, a.object, Need::modify, o); s != NFS3_OK) return s;
  r.wcc.before = pre_op(o);
  if (!r.wcc.before) return errno_to_nfsstat3(errno);
  nfsstat3 s = NFS3_OK;
  if (a.guard && !(r.wcc.before->ctime == *a.guard)) {
    s = NFS3ERR_NOT_SYNC;
  } else {
    s = apply_sattr(o, a.new_attributes, identity(ctx, o));
  }
  if (s == NFS3_OK) s = commit_change(ctx, o);
  r.wcc.after = post_op(o);
  return s;
}

nfsstat3 NfsService::do_lookup(const CallContext& ctx, const diropargs3& a, LOOKUP3res& r) {
  Object dir;
  struct stat st {};
  std::shared_ptr<const OpenFiles::File> held;
  int dirfd = -1;
  if (!ctx.may_block) {
    // On a transport's thread: a directory held open, and a name the kernel
    // has cached (Resolve::cached), so nothing waits for the disk; on an
    // export in memory any name but a mount point (Resolve::same_mount),
    // timed as a change is: it takes the directory's lock, which a change
    // elsewhere may hold.
    if (auto s = held_open(ctx, a.dir, dir, held, st, OpenFiles::Use::path); s != NFS3_OK) return s;
    dirfd = held->path.get();
  } else {
    if (auto s = access(ctx, a.dir, Need::read, dir); s != NFS3_OK) return s;
    if (stat_fd(dir.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
    if (st.st_nlink == 0) {
      // Removed, and found only because files_ holds it: stale, as it would be without.
      files_.forget(a.dir);
      return NFS3ERR_STALE;
    }
    dirfd = dir.fd.get();
    // Kept for the LOOKUPs that follow in it (a client walking a tree).
    if (S_ISDIR(st.st_mode)) keep_open(a.dir, dir);
  }
  r.dir_attributes = to_fattr3(st, *dir.ex);
  Fd found;
  nfsstat3 looked = lookup_child(*dir.ex, dirfd, st, a.name, found, ctx.may_block ? Resolve::any : Resolve::cached);
  if (looked == NFS3ERR_JUKEBOX && !ctx.may_block && dir.ex->in_memory && !inline_paused()) {
    const InlineStart started = inline_start();
    looked = lookup_child(*dir.ex, dirfd, st, a.name, found, Resolve::same_mount);
    inline_end(started, "LOOKUP");
  }
  if (looked != NFS3_OK) return looked == NFS3ERR_JUKEBOX && !ctx.may_block ? ctx.pass_on() : looked;
  Object child{dir.ex, dir.opts, ObjectFd(std::move(found))};
  if (auto s = handle_of(exports_, *dir.ex, child.fd.get(), r.object); s != NFS3_OK) return s;
  r.obj_attributes = post_op(child);
  return NFS3_OK;
}

nfsstat3 NfsService::do_access(const CallContext& ctx, const ACCESS3args& a, ACCESS3res& r) {
  Object o;
  struct stat st {};
  std::shared_ptr<const OpenFiles::File> f;
  if (!ctx.may_block) {
    if (auto s = held_open(ctx, a.object, o, f, st); s != NFS3_OK) return s;
  } else {
    if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
    if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  }
  const int fd = f ? f->path.get() : o.fd.get();
  r.obj_attributes = to_fattr3(st, *o.ex);
  bool dir = S_ISDIR(st.st_mode);
  auto allowed = [&](int mode) {
    if (::faccessat(fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) == 0) return true;
    if (errno != EINVAL) return false;
    return ::faccessat(AT_FDCWD, ProcPath(fd).c_str(), mode, AT_EACCESS) == 0;
  };
  std::uint32_t want = a.access, granted = 0;
  if ((want & ACCESS3_READ) && allowed(R_OK)) granted |= ACCESS3_READ;
  std::uint32_t modify = want & (ACCESS3_MODIFY | ACCESS3_EXTEND | (dir ? ACCESS3_DELETE : 0));
  if (modify && o.opts->rw && allowed(W_OK)) granted |= modify;
  if (dir && (want & ACCESS3_LOOKUP) && allowed(X_OK)) granted |= ACCESS3_LOOKUP;
  if (!dir && (want & ACCESS3_EXECUTE) && allowed(X_OK)) granted |= ACCESS3_EXECUTE;
  r.access = granted;
  return NFS3_OK;
}

nfsstat3 NfsService::do_readlink(const CallContext& ctx, const FhArgs& a, READLINK3res& r) {
  Object o;
  if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
  r.symlink_attributes = post_op(o);
  if (!r.symlink_attributes || r.symlink_attributes->type != NF3LNK) return NFS3ERR_INVAL;
  char buf[kMaxPath];
  ssize_t n = ::readlinkat(o.fd.get(), "", buf, sizeof buf);
  if (n < 0) return errno_to_nfsstat3(errno);
  r.data.assign(buf, static_cast<std::size_t>(n));
  return NFS3_OK;
}

nfsstat3 NfsService::do_fsstat(const CallContext& ctx, const FhArgs& a, FSSTAT3res& r) {
  Object o;
  if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
  r.obj_attributes = post_op(o);
  struct statvfs sv {};
  if (::fstatvfs(o.fd.get(), &sv) != 0) return errno_to_nfsstat3(errno);
  r.tbytes = std::uint64_t{sv.f_blocks} * sv.f_frsize;
  r.fbytes = std::uint64_t{sv.f_bfree} * sv.f_frsize;
  r.abytes = std::uint64_t{sv.f_bavail} * sv.f_frsize;
  r.tfiles = sv.f_files;
  r.ffiles = sv.f_ffree;
  r.afiles = sv.f_favail;
  r.invarsec = 0;
  return NFS3_OK;
}

nfsstat3 NfsService::do_fsinfo(const CallContext& ctx, const FhArgs& a, FSINFO3res& r) {
  Object o;
  if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
  r.obj_attributes = post_op(o);
  r.rtmax = r.rtpref = limits_.rtmax;
  r.wtmax = r.wtpref = limits_.wtmax;
  r.rtmult = r.wtmult = 4096;
  r.dtpref = 64 * 1024;
  r.maxfilesize = 0x7fffffffffffffffULL;
  r.time_delta = {0, 1};
  r.properties = FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
  return NFS3_OK;
}

nfsstat3 NfsService::do_pathconf(const CallContext& ctx, const FhArgs& a, PATHCONF3res& r) {
  Object o;
  if (auto s = access(ctx, a.object, Need::read, o); s != NFS3_OK) return s;
  r.obj_attributes = post_op(o);
  long link_max = ::fpathconf(o.fd.get(), _PC_LINK_MAX);
  r.linkmax = link_max > 0 ? static_cast<std::uint32_t>(link_max) : 32000;
  r.name_max = 255;
  return NFS3_OK;
}

}  // namespace nfsrdma::server
