// Filesystem: file data (open with close-to-open checks, exclusive create,
// READ into registered chunks, write-behind, flush and fsync as COMMIT).
#include <fcntl.h>

#include "client/core/errno_map.hpp"
#include "client/fuse/filesystem.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;

void Filesystem::fs_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  std::uint32_t want = 0;
  int acc = fi->flags & O_ACCMODE;
  if (acc == O_RDONLY || acc == O_RDWR) want |= ACCESS3_READ;
  // O_TRUNC writes whatever the access mode: open(O_RDONLY | O_TRUNC) of a
  // file the caller may not write fails, as on a local filesystem.
  if (acc == O_WRONLY || acc == O_RDWR || (fi->flags & O_TRUNC)) want |= ACCESS3_MODIFY;
  auto who = callers_.of(req);
  // One ACCESS answers both questions open asks the server: may this caller
  // open it so, and has the file changed since we last opened it?
  const auto as_of = n->attrs_as_of(attrs_epoch_);
  nfs_->call<ACCESS3res>(Proc::ACCESS, ACCESS3args{n->fh, want}, [this, req, n, want, who, as_of,
                                                                 fi = *fi](Result<ACCESS3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    if ((r->access & want) != want) return (void)fuse_reply_err(req, EACCES);
    bool keep = false;
    if (r->obj_attributes) {
      // The GETATTR that follows a dropped cache is answered from them.
      n->remember_attrs(*r->obj_attributes, as_of);
      keep = n->cto_open(*r->obj_attributes);
    }
    if (!writes_->idle(*n)) keep = true;  // the change is our own data, still on its way
    if (!options_.cto) keep = true;       // nocto: the attribute cache's timeouts decide (auto_inval_data)
    if (!keep && se_) fuse_lowlevel_notify_inval_inode(se_, n->ino, -1, 0);  // stale size and times too
    fuse_file_info out = fi;
    out.keep_cache = keep;
    // A close of a file opened for reading sends no FLUSH, unless POSIX
    // locks are ours to release then (the kernel leaves that to the FLUSH):
    // it has no data of its own to flush, and the kernel client does not
    // write back other opens' data at such a close either.
    out.noflush = (want & ACCESS3_MODIFY) == 0 && options_.local_posix_locks;
    auto* f = new OpenFile{who, nullptr, (want & ACCESS3_MODIFY) != 0};
    track_open(*f, n);
    out.fh = reinterpret_cast<std::uint64_t>(f);
    if (fuse_reply_open(req, &out) != 0) {
      closed_file(*f);
      delete f;
    }
  }, &who);
}

void Filesystem::fs_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  auto dir = node(req, parent);
  if (!dir) return;
  auto who = callers_.of(req);
  CREATE3args a{{dir->fh, name}, createmode3::UNCHECKED, {}, {}};
  bool exclusive = fi->flags & O_EXCL;
  if (exclusive) {
    // RFC 1813 §3.3.8: the verifier makes a retransmitted exclusive CREATE
    // succeed; the mode is set afterwards, since the server kept the verifier
    // in the file's times.
    a.mode = createmode3::EXCLUSIVE;
    std::uint64_t v = verifier_base_ + exclusive_creates_.fetch_add(1, std::memory_order_relaxed);
    for (auto& b : a.verf) {
      b = static_cast<std::uint8_t>(v >> 56);
      v <<= 8;
    }
  } else {
    a.obj_attributes.mode = mode & 07777;
  }
  fi->fh = reinterpret_cast<std::uint64_t>(new OpenFile{who, nullptr, (fi->flags & O_ACCMODE) != O_RDONLY});
  dir->forget_attrs();
  nfs_->call<CreateRes>(Proc::CREATE, a, [this, req, who, exclusive, mode, dir, nm = std::string(name),
                                          fi = *fi](Result<CreateRes> r) mutable {
    if (int e = failed(r)) {
      dir->listing_drop();  // no answer, or one that says the listing is wrong (EEXIST)
      delete opened(&fi);
      return (void)fuse_reply_err(req, e);
    }
    dir->listing_apply(r->dir_wcc, nullptr, &nm);
    if (!exclusive || !r->obj) return reply_created(req, dir, nm, *r, &fi);
    SETATTR3args s;
    s.object = *r->obj;
    s.new_attributes.mode = mode & 07777;
    s.new_attributes.atime.how = s.new_attributes.mtime.how = time_how::SET_TO_SERVER_TIME;
    nfs_->call<WccRes>(Proc::SETATTR, s, [this, req, dir, nm, fi, created = *r](Result<WccRes> w) mutable {
      if (int e = failed(w)) {
        delete opened(&fi);
        return (void)fuse_reply_err(req, e);
      }
      created.obj_attributes = w->wcc.after;
      reply_created(req, dir, nm, created, &fi);
    }, &who);
  }, &who);
}

void Filesystem::fs_read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  size = std::min<std::size_t>(size, options_.rsize);  // max_read keeps the kernel within it
  if (locks_ && locks_->lost(n->fh)) return (void)fuse_reply_err(req, EIO);  // its lock went in a server restart
  const OpenFile* f = opened(fi);
  if (writes_->idle(*n)) return read_chunk(req, n, size, off, f->who);
  auto go = interrupts_->guard([this, req, n, size, off, who = f->who](int err) {
    if (err) return (void)fuse_reply_err(req, err);
    read_chunk(req, n, size, off, who);
  });
  writes_->drain(n, [go] { go(0); });
}

void Filesystem::read_chunk(fuse_req_t req, const std::shared_ptr<Node>& n, std::size_t size, off_t off,
                            const client::Identity& who) {
  std::uint8_t* buf = read_pool_->acquire();
  n->forget_attrs();  // its atime
  nfs_->read(n->fh, static_cast<std::uint64_t>(off), {buf, size},
             [this, req, buf](Result<client::NfsClient::ReadResult> r) {
               if (!r || r->status != NFS3_OK) {
                 fuse_reply_err(req, !r ? call_errno(r.error()) : client::nfsstat3_to_errno(r->status));
               } else {
                 fuse_reply_buf(req, reinterpret_cast<const char*>(buf), r->count);
               }
               read_pool_->release(buf);
             },
             &who);
}

// write_buf, not write: with FUSE_CAP_SPLICE_READ the data arrives in a pipe
// holding the writer's pages, and is copied once, straight into the chunk.
void Filesystem::fs_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  std::size_t size = fuse_buf_size(in);
  if (size > options_.wsize) return (void)fuse_reply_err(req, EINVAL);  // max_write keeps the kernel within it
  if (locks_ && locks_->lost(n->fh)) return (void)fuse_reply_err(req, EIO);
  ssize_t copied = 0;
  int e = writes_->write(n, static_cast<std::uint64_t>(off), size, [&](std::uint8_t* dst) {
    fuse_bufvec out{};
    out.count = 1;
    out.buf[0].size = size;
    out.buf[0].mem = dst;
    copied = fuse_buf_copy(&out, in, FUSE_BUF_SPLICE_NONBLOCK);
  }, opened(fi)->who, opened(fi)->seen);
  if (e == 0 && copied != static_cast<ssize_t>(size)) e = copied < 0 ? static_cast<int>(-copied) : EIO;
  if (e != 0) return (void)fuse_reply_err(req, e);
  if (!options_.writes_sync()) return (void)fuse_reply_write(req, size);
  // sync (or noac): the data is on the server's stable storage before write(2) returns.
  writes_->commit(n, interrupts_->guard([req, size](int err) {
    err ? fuse_reply_err(req, err) : fuse_reply_write(req, size);
  }), opened(fi)->seen);
}

void Filesystem::fs_release(fuse_req_t req, fuse_file_info* fi) {
  // flush ran at close(2) and committed; only the open's state is left, a
  // flock(2) lock of this open file description, and a hidden name to
  // remove if this was its last open.
  if (fi->flock_release && locks_ && opened(fi)->node) locks_->release(opened(fi)->node->fh, fi->lock_owner);
  closed_file(*opened(fi));
  delete opened(fi);
  fuse_reply_err(req, 0);
}

void Filesystem::fs_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  // A close lets go of the closing process's POSIX locks on the file (the
  // kernel leaves that to us), once its writes are committed.
  // The close of a descriptor not open for writing reports no write error
  // (the kernel client's nfs_file_flush), and tells its open of none.
  const OpenFile& f = *opened(fi);
  if (locks_ && locks_->holds(n->fh, fi->lock_owner)) {
    int e = commit_now(n, f.seen, f.writable);
    locks_->release(n->fh, fi->lock_owner);
    return (void)fuse_reply_err(req, e);
  }
  auto answer = interrupts_->guard([req](int e) { fuse_reply_err(req, e); });
  writes_->commit(n, f.writable ? answer : WriteBack::untold(answer), f.seen);
}

void Filesystem::fs_fsync(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  writes_->commit(n, interrupts_->guard([req](int e) { fuse_reply_err(req, e); }), opened(fi)->seen);
}

}  // namespace nfsrdma::fuse
