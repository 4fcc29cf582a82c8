// NFSv3 data procedures: READ, WRITE, COMMIT.
//
// WRITE runs on a transport's own thread (CallContext::may_block false) when
// nothing in it waits for the disk: its descriptor is open (in the open-file
// cache, or opened there from the O_PATH one a CREATE left), it asks for no flush, it is small, and a page it writes only in
// part is in the page cache (else the kernel reads it first). Buffered
// writes have no RWF_NOWAIT on ext4 or tmpfs, so this is decided here, and
// checked afterwards: an inline write that slept long (dirty-page
// throttling, a journal commit) sends WRITEs and changes to workers for a
// while (NfsService::inline_end).
//
// READ encodes its reply around the data: the result header is written
// with count and eof left blank, the file is read straight into the reply
// buffer or into the memory the transport lent for an RDMA Write chunk, or
// spliced into a pipe the transport lent (TCP, large READs), and those are
// patched afterwards, with the data's place.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "server/nfs_service.hpp"

namespace nfsrdma::server {

namespace {
constexpr std::size_t kInlineWriteMax = 64 * 1024;
// READs this large go by pipe where the transport takes one (ctx.pipes):
// below it, a copy costs less than the splices.
constexpr std::uint32_t kSpliceMin = 64 * 1024;
// A pipe takes a slot per page of the page cache spliced in.
constexpr std::uint64_t kPage = 4096;
std::uint64_t pages_spanned(std::uint64_t offset, std::uint64_t count) {
  return (offset % kPage + count + kPage - 1) / kPage;
}

// Splices up to `count` bytes of `fd` at `offset` into `pipe`, to the end of
// the file or until the pipe is full (a short READ, which the client
// continues). Returns 0, or the errno of a failure before any byte moved
// (after some, it stops there).
int splice_in(int fd, std::uint64_t offset, std::size_t count, PipePool::Pipe& pipe) {
  auto off = static_cast<loff_t>(offset);
  while (pipe.held() < count) {
    ssize_t n = ::splice(fd, &off, pipe.write_end(), nullptr, count - pipe.held(), SPLICE_F_NONBLOCK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return pipe.held() > 0 ? 0 : errno;
    if (n == 0) break;
    pipe.filled(static_cast<std::size_t>(n));
  }
  return 0;
}

metrics::Counter& io_bytes(bool written) {
  static metrics::Counter& read = metrics::registry().counter("nfsrdma_server_bytes_total",
                                                              "File data read and written for clients", {{"op", "read"}});
  static metrics::Counter& write = metrics::registry().counter(
      "nfsrdma_server_bytes_total", "File data read and written for clients", {{"op", "write"}});
  return written ? write : read;
}
}  // namespace

using namespace nfs3;

nfsstat3 NfsService::io_file(const CallContext& ctx, const nfs_fh3& fh, bool write, Object& o,
                             std::shared_ptr<const OpenFiles::File>& f, struct stat& st) {
  const Need need = write ? Need::modify : Need::read;
  const auto use = write ? OpenFiles::Use::write : OpenFiles::Use::read;
  if ((f = files_.get(fh, use))) {
    o.ex = exports_.by_id(f->export_id);
    if (!o.ex) {
      files_.forget(fh);
      return NFS3ERR_STALE;
    }
    if (auto s = admit(ctx, need, o); s != NFS3_OK) return s;
  } else {
    Object path;
    if (ctx.may_block) {
      if (auto s = access(ctx, fh, need, path); s != NFS3_OK) return s;
    } else {
      // Resolving a handle may read from disk: on a transport's thread only
      // a file files_ holds (by its O_PATH descriptor: what a CREATE just
      // made, or open for the other use), whose inode is in memory, is
      // opened, timed as a WRITE or change is. The open can still wait
      // (a fanotify permission listener, IMA): the timing's pause bounds it.
      std::shared_ptr<const OpenFiles::File> held;
      if (inline_paused()) return ctx.pass_on();
      if (auto s = held_open(ctx, fh, path, held, st, std::nullopt, need); s != NFS3_OK) return s;
      path.fd = dup_fd(held->path.get());  // for the new entry, which outlives this one
      if (!path.fd.valid()) return ctx.pass_on();
    }
    if (stat_fd(path.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
    if (S_ISDIR(st.st_mode)) return NFS3ERR_ISDIR;
    if (!S_ISREG(st.st_mode)) return NFS3ERR_INVAL;
    // Opened by root and kept for every caller: each one's permission is checked below.
    Credentials who = identity(ctx, path);
    if (!become_root()) return NFS3ERR_SERVERFAULT;
    // Writers' read too, only to ask the page cache (may_write_inline).
    // O_NONBLOCK inline: a lease another process holds does not make it wait
    // (and on the local filesystems exported, it changes no read or write).
    const int flags = (write ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | (ctx.may_block ? 0 : O_NONBLOCK);
    // A WRITE times its open with the rest of it (do_write).
    const bool timed = !ctx.may_block && !write;
    const InlineStart started = timed ? inline_start() : InlineStart{};
    Fd io(::open(ProcPath(path.fd.get()).c_str(), flags));
    int err = errno;
    if (timed) inline_end(started, "file's open");
    if (!become(who)) return NFS3ERR_SERVERFAULT;
    if (!io.valid() && err == EWOULDBLOCK && !ctx.may_block) return ctx.pass_on();
    if (!io.valid()) return errno_to_nfsstat3(err);
    o.ex = path.ex;
    o.opts = path.opts;
    f = files_.put(fh, use, {path.ex->id, path.fd.release(), std::move(io)});
  }
  // Every call: the file still has a name (else the handle is stale, as on
  // nfsd), and the caller may read or write it, as the caller (AT_EACCESS:
  // the thread's fsuid, fsgid and groups). Its owner may read and write it
  // whatever the mode says (nfsd's owner override), so an owner's READ asks
  // nothing more, and so does an owner's WRITE to a file the stat shows is
  // not immutable (EPERM, which the override does not lift). A mount made
  // read-only (EROFS) refuses no file held open for writing, unless the
  // filesystem forced it after an error, as ext4's errors=remount-ro does;
  // the write or its commit then fails instead.
  bool may_be_immutable = true;
  if (stat_io(f->io.get(), st, may_be_immutable) != 0) return errno_to_nfsstat3(errno);
  if (st.st_nlink == 0) {
    files_.forget(fh);
    return NFS3ERR_STALE;
  }
  const bool owner = st.st_uid == identity(ctx, o).uid;
  if (owner && !(write && may_be_immutable)) return NFS3_OK;
  if (::faccessat(f->path.get(), "", write ? W_OK : R_OK, AT_EMPTY_PATH | AT_EACCESS) != 0) {
    if (errno != EACCES || !owner) return errno_to_nfsstat3(errno);
  }
  return NFS3_OK;
}

void NfsService::do_read(const CallContext& ctx, const READ3args& a, xdr::Encoder& out, rpc::ReplyMessage& reply) {
  const std::size_t start = out.size();
  auto fail = [&](nfsstat3 s, const Object* o, const struct stat* st) {
    out.truncate(start);
    reply.unsplit();
    READ3res r;
    r.status = s;
    if (o && st) r.file_attributes = to_fattr3(*st, *o->ex);
    codec(out, r);
  };
  Object o;
  std::shared_ptr<const OpenFiles::File> f;
  struct stat st {};
  if (auto s = io_file(ctx, a.file, false, o, f, st); s != NFS3_OK) return fail(s, nullptr, nullptr);
  const int fd = f->io.get();
  // Inline (ctx.may_block false), only what the page cache holds: EAGAIN
  // (or a filesystem without RWF_NOWAIT) sends the call to a worker. A file
  // in memory is read as it is: tmpfs would refuse every RWF_NOWAIT.
  auto pread_some = [&](std::uint8_t* dst, std::size_t len, std::uint64_t off) -> ssize_t {
    if (ctx.may_block || o.ex->in_memory) return ::pread(fd, dst, len, static_cast<off_t>(off));
    iovec v{dst, len};
    ssize_t n = ::preadv2(fd, &v, 1, static_cast<off_t>(off), RWF_NOWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EOPNOTSUPP)) ctx.would_block = true;
    return n;
  };
  // Into the registered memory a transport lent, when it did: the data goes
  // by RDMA Write from where it landed, at most the room the client's Write
  // chunk gave (a short read past it, which the client asks on from).
  std::uint32_t count = std::min(a.count, limits_.rtmax);
  if (!ctx.area.empty()) count = static_cast<std::uint32_t>(std::min<std::size_t>(count, ctx.area.size()));
  // Else into a pipe the transport lent, when it sends pipes and the file has
  // much to give there: spliced from the page cache, never copied.
  // Splicing from a file may wait for the disk (it has no RWF_NOWAIT), so
  // on a transport's thread only from memory; other such READs go to a
  // worker. A file that cannot be spliced is copied.
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t there = a.offset < size ? std::min<std::uint64_t>(count, size - a.offset) : 0;
  const bool to_pipe = ctx.pipes && ctx.area.empty() && there >= kSpliceMin &&
                       pages_spanned(a.offset, there) * kPage <= ctx.pipes->capacity();
  if (to_pipe && !ctx.may_block && !o.ex->in_memory) return fail(ctx.pass_on(), nullptr, nullptr);
  PipePool::Pipe pipe = to_pipe ? ctx.pipes->take() : PipePool::Pipe();
  out.enumeration(NFS3_OK);
  post_op_attr attrs = to_fattr3(st, *o.ex);
  xdr::xdr_optional(out, attrs);
  const std::size_t count_at = out.size();
  out.u32(0);          // count
  out.boolean(false);  // eof
  if (pipe) {
    if (int err = splice_in(fd, a.offset, count, pipe); err == 0) {
      const std::size_t got = pipe.held();
      out.patch_u32(count_at, static_cast<std::uint32_t>(got));
      out.patch_u32(count_at + 4, a.offset + got >= size ? 1 : 0);
      out.u32(static_cast<std::uint32_t>(got));  // the reply ends at the data's length word
      reply.pipe = std::move(pipe);
      io_bytes(false).inc(got);
      o.ex->read_bytes->inc(got);
      return;
    } else if (err != EINVAL && err != EOPNOTSUPP && err != ENOSYS) {
      return fail(errno_to_nfsstat3(err), &o, &st);
    }
    pipe = {};  // a filesystem without splice: copied below
  }
  // Into the lent memory, the reply then ending at the data's length word;
  // else into the reply itself.
  const bool in_area = !ctx.area.empty();
  const std::size_t data_at = in_area ? out.size() : out.reserve_opaque(count);
  if (in_area) out.u32(0);
  auto room = in_area ? ctx.area.first(count) : out.reserved(data_at, count);
  std::size_t got = 0;
  while (got < count) {
    ssize_t n = pread_some(room.data() + got, count - got, a.offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno_to_nfsstat3(errno), &o, &st);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  const bool eof = a.offset + got >= static_cast<std::uint64_t>(st.st_size);
  out.patch_u32(count_at, static_cast<std::uint32_t>(got));
  out.patch_u32(count_at + 4, eof ? 1 : 0);
  if (in_area) {
    out.patch_u32(data_at, static_cast<std::uint32_t>(got));
    reply.payload = room.first(got);
  } else {
    out.commit_opaque(data_at, static_cast<std::uint32_t>(got));
  }
  io_bytes(false).inc(got);
  o.ex->read_bytes->inc(got);
}

nfsstat3 NfsService::do_write(const CallContext& ctx, const WRITE3args& a, WRITE3res& r) {
  if (a.count != a.data.size()) return NFS3ERR_INVAL;
  // Too big to run inline, or a slow one paused them: off to a worker before
  // any syscall here, which the worker would only make again.
  if (!ctx.may_block && (a.data.size() > kInlineWriteMax || inline_paused())) return ctx.pass_on();
  const InlineStart started = ctx.may_block ? InlineStart{} : inline_start();
  Object o;
  std::shared_ptr<const OpenFiles::File> f;
  struct stat st {};
  if (auto s = io_file(ctx, a.file, true, o, f, st); s != NFS3_OK) return s;
  const int fd = f->io.get();
  if (!ctx.may_block && !may_write_inline(a, o, *f, st)) return ctx.pass_on();
  r.file_wcc.before = to_wcc_attr(st);
  auto after = [&] {
    struct stat now {};
    if (::fstat(fd, &now) == 0) r.file_wcc.after = to_fattr3(now, *o.ex);
  };
  std::size_t done = 0;
  while (done < a.data.size()) {
    ssize_t n = ::pwrite(fd, a.data.data() + done, a.data.size() - done, static_cast<off_t>(a.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      after();
      return errno_to_nfsstat3(err);
    }
    done += static_cast<std::size_t>(n);
  }
  // `async` exports skip the flush but still report what the client asked for.
  if (o.opts->sync && a.stable != stable_how::UNSTABLE) {
    int rc = a.stable == stable_how::FILE_SYNC ? ::fsync(fd) : ::fdatasync(fd);
    if (rc != 0) {
      int err = errno;
      after();
      return errno_to_nfsstat3(err);
    }
  }
  if (!ctx.may_block) inline_end(started, "WRITE");
  r.count = static_cast<std::uint32_t>(done);
  io_bytes(true).inc(done);
  o.ex->write_bytes->inc(done);
  r.committed = a.stable;
  r.verf = write_verf_;
  after();
  return NFS3_OK;
}

bool NfsService::may_write_inline(const WRITE3args& a, const Object& o, const OpenFiles::File& f,
                                  const struct stat& st) const {
  if (o.ex->in_memory) return true;  // no disk to wait for, a flush's included (tmpfs's fsync does nothing)
  if (o.opts->sync && a.stable != stable_how::UNSTABLE) return false;  // a flush waits for the disk
  const int fd = f.io.get();
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // A page the file has data in, written in part, must be in the page cache.
  auto cached = [&](std::uint64_t at) {
    const std::uint64_t start = at - at % page;
    if (at % page == 0 || start >= size) return true;
    std::uint8_t b;
    iovec v{&b, 1};
    return ::preadv2(fd, &v, 1, static_cast<off_t>(start), RWF_NOWAIT) >= 0;
  };
  const std::uint64_t end = a.offset + a.data.size();
  if (!cached(a.offset)) return false;
  return (a.offset % page != 0 && end / page == a.offset / page) || cached(end);  // one page: asked once
}

nfsstat3 NfsService::do_commit(const CallContext& ctx, const COMMIT3args& a, COMMIT3res& r) {
  Object o;
  if (auto s = access(ctx, a.file, Need::read, o); s != NFS3_OK) return s;
  r.file_wcc.before = pre_op(o);
  struct stat st {};
  if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  if (!S_ISREG(st.st_mode)) return S_ISDIR(st.st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
  if (o.opts->sync) {
    // Flushing needs no permission of the caller: it changes nothing they
    // could not. The writers' descriptor if it is open, else one opened as root.
    int rc, err;
    if (auto f = files_.get(a.file, OpenFiles::Use::write)) {
      rc = ::fsync(f->io.get());
      err = errno;
    } else {
      Credentials who = identity(ctx, o);
      if (!become_root()) return NFS3ERR_SERVERFAULT;
      Fd fd(::open(ProcPath(o.fd.get()).c_str(), O_RDONLY | O_CLOEXEC));
      rc = fd.valid() ? ::fsync(fd.get()) : -1;
      err = errno;
      if (!become(who)) return NFS3ERR_SERVERFAULT;
    }
    if (rc != 0) {
      r.file_wcc.after = post_op(o);
      return errno_to_nfsstat3(err);
    }
  }
  r.file_wcc.after = post_op(o);
  r.verf = write_verf_;
  return NFS3_OK;
}

}  // namespace nfsrdma::server
