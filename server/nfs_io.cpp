// NFSv3 data procedures: READ, WRITE, COMMIT.
//
// READ encodes its reply around the data: the result header is written with
// count and eof left blank, the file is read straight into the reply buffer, and those
// are patched afterwards; the data's place is recorded for transports that
// move it separately (an RDMA Write chunk).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "lib/base/metrics.hpp"
#include "server/nfs_service.hpp"

namespace nfsrdma::server {

namespace {
metrics::Counter& io_bytes(bool written) {
  static metrics::Counter& read = metrics::registry().counter("nfsrdma_server_bytes_total",
                                                              "File data read and written for clients", {{"op", "read"}});
  static metrics::Counter& write = metrics::registry().counter(
      "nfsrdma_server_bytes_total", "File data read and written for clients", {{"op", "write"}});
  return written ? write : read;
}
}  // namespace

using namespace nfs3;

nfsstat3 NfsService::open_for_io(const CallContext& ctx, const Object& o, int flags, Fd& out) const {
  struct stat st {};
  if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  if (S_ISDIR(st.st_mode)) return NFS3ERR_ISDIR;
  if (!S_ISREG(st.st_mode)) return NFS3ERR_INVAL;
  ProcPath path(o.fd.get());
  out = Fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!out.valid() && errno == EACCES) {
    Credentials who = identity(ctx, o);
    if (st.st_uid == who.uid) {
      if (!become_root()) return NFS3ERR_SERVERFAULT;
      out = Fd(::open(path.c_str(), flags | O_CLOEXEC));
      int err = errno;
      if (!become(who)) {
        out.reset();
        return NFS3ERR_SERVERFAULT;
      }
      errno = err;
    } else {
      errno = EACCES;
    }
  }
  return out.valid() ? NFS3_OK : errno_to_nfsstat3(errno);
}

void NfsService::do_read(const CallContext& ctx, const READ3args& a, xdr::Encoder& out, rpc::ReplyMessage& reply) {
  const std::size_t start = out.size();
  auto fail = [&](nfsstat3 s, const Object* o) {
    out.truncate(start);
    reply.payload_in_area = false;
    reply.payload_length = 0;
    READ3res r;
    r.status = s;
    if (o && o->ex) r.file_attributes = post_op(*o);
    codec(out, r);
  };
  Object o;
  if (auto s = access(ctx, a.file, Need::read, o); s != NFS3_OK) return fail(s, nullptr);
  Fd f;
  if (auto s = open_for_io(ctx, o, O_RDONLY, f); s != NFS3_OK) return fail(s, &o);
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return fail(errno_to_nfsstat3(errno), &o);
  std::uint32_t count = std::min(a.count, limits_.rtmax);

  if (reply.area.size() >= count) {
    // The transport lent registered memory: read straight into it and send the
    // reply reduced; the data goes out by RDMA Write from where it landed.
    std::size_t got = 0;
    while (got < count) {
      ssize_t n = ::pread(f.get(), reply.area.data() + got, count - got, static_cast<off_t>(a.offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(errno_to_nfsstat3(errno), &o);
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.enumeration(NFS3_OK);
    post_op_attr attrs = to_fattr3(st, *o.ex);
    xdr::xdr_optional(out, attrs);
    out.u32(static_cast<std::uint32_t>(got));
    out.boolean(a.offset + got >= static_cast<std::uint64_t>(st.st_size));
    out.u32(static_cast<std::uint32_t>(got));
    reply.payload_offset = out.size();
    reply.payload_length = got;
    reply.payload_in_area = true;
    io_bytes(false).inc(got);
    return;
  }

  out.enumeration(NFS3_OK);
  post_op_attr attrs = to_fattr3(st, *o.ex);
  xdr::xdr_optional(out, attrs);
  const std::size_t count_at = out.size();
  out.u32(0);
  out.boolean(false);
  const std::size_t data_at = out.reserve_opaque(count);
  auto room = out.reserved(data_at, count);
  std::size_t got = 0;
  while (got < count) {
    ssize_t n = ::pread(f.get(), room.data() + got, count - got, static_cast<off_t>(a.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno_to_nfsstat3(errno), &o);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bool eof = a.offset + got >= static_cast<std::uint64_t>(st.st_size);
  out.patch_u32(count_at, static_cast<std::uint32_t>(got));
  out.patch_u32(count_at + 4, eof ? 1 : 0);
  out.commit_opaque(data_at, static_cast<std::uint32_t>(got));
  reply.payload_offset = data_at + 4;
  reply.payload_length = got;
  io_bytes(false).inc(got);
}

nfsstat3 NfsService::do_write(const CallContext& ctx, const WRITE3args& a, WRITE3res& r) {
  Object o;
  if (auto s = access(ctx, a.file, Need::modify, o); s != NFS3_OK) return s;
  r.file_wcc.before = pre_op(o);
  if (a.count != a.data.size()) return NFS3ERR_INVAL;
  Fd f;
  if (auto s = open_for_io(ctx, o, O_WRONLY, f); s != NFS3_OK) return s;
  std::size_t done = 0;
  while (done < a.data.size()) {
    ssize_t n = ::pwrite(f.get(), a.data.data() + done, a.data.size() - done, static_cast<off_t>(a.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      r.file_wcc.after = post_op(o);
      return errno_to_nfsstat3(n < 0 ? errno : EIO);
    }
    done += static_cast<std::size_t>(n);
  }
  // `async` exports skip the flush but still report what the client asked for.
  if (o.opts->sync && a.stable != stable_how::UNSTABLE) {
    int rc = a.stable == stable_how::FILE_SYNC ? ::fsync(f.get()) : ::fdatasync(f.get());
    if (rc != 0) {
      r.file_wcc.after = post_op(o);
      return errno_to_nfsstat3(errno);
    }
  }
  r.count = static_cast<std::uint32_t>(done);
  io_bytes(true).inc(done);
  r.committed = a.stable;
  r.verf = write_verf_;
  r.file_wcc.after = post_op(o);
  return NFS3_OK;
}

nfsstat3 NfsService::do_commit(const CallContext& ctx, const COMMIT3args& a, COMMIT3res& r) {
  Object o;
  if (auto s = access(ctx, a.file, Need::read, o); s != NFS3_OK) return s;
  r.file_wcc.before = pre_op(o);
  struct stat st {};
  if (stat_fd(o.fd.get(), st) != 0) return errno_to_nfsstat3(errno);
  if (!S_ISREG(st.st_mode)) return S_ISDIR(st.st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
  if (o.opts->sync) {
    // Flushing needs no permission of the caller: it changes nothing they could not.
    Credentials who = identity(ctx, o);
    if (!become_root()) return NFS3ERR_SERVERFAULT;
    Fd f(::open(ProcPath(o.fd.get()).c_str(), O_RDONLY | O_CLOEXEC));
    int rc = f.valid() ? ::fsync(f.get()) : -1;
    int err = errno;
    if (!become(who)) return NFS3ERR_SERVERFAULT;
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
