// fcntl and flock locks on the mount: the server's, through NLM
// (client::LockClient), with the data rules the kernel client keeps around
// them. flock(2) is a whole-file lock, as the kernel client maps it, owned by
// the open file description. A waiting F_SETLKW or flock blocks its FUSE
// worker; an interrupt (a signal to the waiting process) ends it with EINTR.
#include <sys/file.h>

#include <future>

#include "client/fuse/filesystem.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma::fuse {

using nlm4::kEof;

namespace {

// [start, end] from a struct flock as FUSE passes it (l_whence SEEK_SET).
bool range_of(const struct flock* l, std::uint64_t& start, std::uint64_t& end) {
  if (l->l_start < 0 || l->l_len < 0) return false;
  start = static_cast<std::uint64_t>(l->l_start);
  end = l->l_len == 0 ? kEof : start + static_cast<std::uint64_t>(l->l_len) - 1;
  return end >= start;
}

}  // namespace

int Filesystem::commit_now(const std::shared_ptr<Node>& n, WriteBack::ErrorsSeen seen, bool tell) {
  auto done = std::make_shared<std::promise<int>>();
  auto f = done->get_future();
  auto answer = interrupts_->guard([done](int e) { done->set_value(e); });
  writes_->commit(n, tell ? answer : WriteBack::untold(answer), std::move(seen));
  return f.get();
}

int Filesystem::set_lock(fuse_req_t req, const std::shared_ptr<Node>& n, client::LockClient::Owner owner, short type,
                         std::uint64_t start, std::uint64_t end, bool wait) {
  if (type == F_UNLCK) {
    // Data written under the lock reaches the server before the lock goes;
    // a write error is left for the descriptors' fsync and close, as the
    // kernel client's unlock leaves it.
    int e = commit_now(n, nullptr, false);
    int u = locks_->unlock(n->fh, owner, start, end);
    return e ? e : u;
  }
  int e = locks_->lock(n->fh, owner, type == F_WRLCK, start, end, wait,
                       [req] { return fuse_req_interrupted(req) != 0; });
  // What others wrote before letting go must be read from the server now:
  // drop the cached pages and attributes (the size too).
  if (e == 0) n->forget_attrs();  // the GETATTR that follows goes to the server
  if (e == 0 && se_) fuse_lowlevel_notify_inval_inode(se_, n->ino, 0, 0);
  return e;
}

void Filesystem::fs_getlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  auto n = node(req, ino);
  if (!n) return;
  std::uint64_t start = 0, end = 0;
  if (!range_of(lock, start, end)) return (void)fuse_reply_err(req, EINVAL);
  std::optional<client::LockClient::Holder> h;
  int e = locks_->test(n->fh, {fi->lock_owner, lock->l_pid}, lock->l_type == F_WRLCK, start, end, h);
  if (e) return (void)fuse_reply_err(req, e);
  struct flock out = *lock;
  out.l_whence = SEEK_SET;
  if (!h) {
    out.l_type = F_UNLCK;
  } else {
    out.l_type = h->exclusive ? F_WRLCK : F_RDLCK;
    out.l_start = static_cast<off_t>(h->start);
    out.l_len = h->end == kEof ? 0 : static_cast<off_t>(h->end - h->start + 1);
    out.l_pid = h->svid;  // the holder's process on its own host
  }
  fuse_reply_lock(req, &out);
}

void Filesystem::fs_setlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  auto n = node(req, ino);
  if (!n) return;
  std::uint64_t start = 0, end = 0;
  if (!range_of(lock, start, end)) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_err(req, set_lock(req, n, {fi->lock_owner, lock->l_pid}, lock->l_type, start, end, sleep != 0));
}

void Filesystem::fs_flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op) {
  auto n = node(req, ino);
  if (!n) return;
  const short type = op & LOCK_UN ? F_UNLCK : op & LOCK_EX ? F_WRLCK : F_RDLCK;
  const auto pid = static_cast<std::int32_t>(fuse_req_ctx(req)->pid);
  fuse_reply_err(req, set_lock(req, n, {fi->lock_owner, pid}, type, 0, kEof, !(op & LOCK_NB)));
}

}  // namespace nfsrdma::fuse
