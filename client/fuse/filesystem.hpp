// The FUSE low-level filesystem over client/core: each operation sends its
// NFS call and replies to the kernel from the call's completion, so many
// requests are in flight without a thread each (libfuse's passthrough_hp
// shape: the `fs_*` methods reply; helpers return an errno).
//
// Caching: the kernel keeps attributes and dentries for the timeouts given in
// each reply (acregmin..acregmax for files, acdirmin..acdirmax for
// directories, longer for files unchanged for longer, 0 with noac), which is
// the NFS attribute cache. open() always asks the server (ACCESS returns fresh
// attributes) and keeps the kernel's cached pages only when mtime, ctime and
// size are what the last open saw: close-to-open consistency. flush (close)
// and fsync COMMIT the write-behind data.
//
// Permissions: the kernel checks every caller against the cached mode and
// owner (default_permissions, always on): search permission on each path
// component, a FIFO's or device's mode at open. The server checks every call
// again under the caller's identity. Local root passes the kernel's checks,
// though a server that squashes root treats it as nobody: so a name in a
// directory that others may not search is cached only once the server let
// root search it at its present mode and owner (Node::names_cacheable, as the
// kernel client caches an ACCESS answer per directory); until then every walk
// through it is a LOOKUP the server answers for the caller. A directory whose
// mode or owner changes here so that others may not search it loses its
// cached entry, and the names under it, at once.
#pragma once

#include <fuse_lowlevel.h>

#include <condition_variable>
#include <memory>
#include <random>
#include <thread>

#include "client/core/errno_map.hpp"
#include "client/core/lock_client.hpp"
#include "client/core/nfs_client.hpp"
#include "client/fuse/buffer_pool.hpp"
#include "client/fuse/callers.hpp"
#include "client/fuse/interrupts.hpp"
#include "client/fuse/mount_options.hpp"
#include "client/fuse/node_table.hpp"
#include "client/fuse/write_back.hpp"

namespace nfsrdma::fuse {

class Filesystem {
 public:
  // Mounts the export over NFS (not yet FUSE): MOUNT, FSINFO, PATHCONF, and
  // the registered buffer pools. Errors here are the user's one-line message.
  static Result<std::unique_ptr<Filesystem>> connect(MountOptions options);
  ~Filesystem();

  const MountOptions& options() const { return options_; }
  // The session, for invalidating the kernel's cached attributes (open).
  // nullptr before the session is destroyed.
  void attach(fuse_session* se);
  // Once the session has ended, before it is destroyed: what the
  // write-behind still holds goes to the server, then the NFS client stops
  // (every call still out answered) and the lock client goes. False when
  // some of that data did not reach the server.
  bool finish();
  static const fuse_lowlevel_ops& operations();
  // Every request's calls belong to its caller (client::CallOwner), and an
  // interrupt of it goes to interrupts_ (interrupts.hpp).
  void watch(fuse_req_t req);

  // The operations, called through operations()'s table.
  void fs_init(fuse_conn_info* conn);
  void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void fs_forget(fuse_ino_t ino, std::uint64_t n);
  void fs_getattr(fuse_req_t req, fuse_ino_t ino);
  void fs_setattr(fuse_req_t req, fuse_ino_t ino, const struct stat* attr, int to_set, fuse_file_info* fi);
  void fs_readlink(fuse_req_t req, fuse_ino_t ino);
  void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
  void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  void fs_remove(fuse_req_t req, fuse_ino_t parent, const char* name, nfs3::Proc proc);
  void fs_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
  void fs_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
                 unsigned int flags);
  void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
  void fs_statfs(fuse_req_t req, fuse_ino_t ino);
  void fs_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fs_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
  void fs_read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi);
  void fs_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi);
  void fs_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fs_fsync(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fs_release(fuse_req_t req, fuse_file_info* fi);
  // fs_lock.cpp: network locks through NLM (client::LockClient).
  void fs_getlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock);
  void fs_setlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep);
  void fs_flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op);
  void fs_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi);
  void fs_releasedir(fuse_req_t req, fuse_file_info* fi);

 private:
  explicit Filesystem(MountOptions o) : options_(std::move(o)), readdirplus_(options_.rdirplus) {}

  // The node for `ino`, or a reply of ESTALE and null.
  std::shared_ptr<Node> node(fuse_req_t req, fuse_ino_t ino);
  struct stat to_stat(const nfs3::fattr3& a, Node* n = nullptr);
  double attr_timeout(const nfs3::fattr3& a) const;
  void reply_attr(fuse_req_t req, const std::shared_ptr<Node>& n, const nfs3::fattr3& a);
  // How long the kernel may walk a cached name in directory `dir_ino`, whose
  // attributes are `dir`, without asking (see the class comment).
  double entry_timeout(const nfs3::post_op_attr& dir, fuse_ino_t dir_ino) const;
  // The entry for `n`, found as `name` in `parent`, whose attributes are `dir`.
  fuse_entry_param entry_for(Node& n, const nfs3::fattr3& a, fuse_ino_t parent, const std::string& name,
                             const nfs3::post_op_attr& dir);
  // `made_empty`: a directory our MKDIR just made, whose listing starts empty (Node::listing_start).
  void reply_entry(fuse_req_t req, const nfs3::nfs_fh3& fh, const nfs3::fattr3& a, fuse_ino_t parent,
                   const std::string& name, const nfs3::post_op_attr& dir, bool made_empty = false);
  // A LOOKUP of `name`, which `parent`'s listing holds as node `ino`, answered
  // from the node's known attributes with no call (Node::listing_find): false
  // if the node is gone, has data on its way, or no attributes are known.
  bool entry_from_listing(fuse_req_t req, fuse_ino_t parent, const std::string& name, fuse_ino_t ino,
                          std::chrono::steady_clock::duration left);
  // After CREATE/MKDIR/SYMLINK/MKNOD: the entry from the reply, or LOOKUP when
  // the server left out the handle or attributes (they are optional).
  void reply_created(fuse_req_t req, const std::shared_ptr<Node>& dir, const std::string& name,
                     const nfs3::CreateRes& res, fuse_file_info* fi = nullptr);
  // Drops the kernel's cached entry of directory `ino` and the names under
  // it (others may no longer search it), on invalidator_'s thread: the kernel takes the parent's lock,
  // which an operation waiting on this process may hold.
  void drop_entry_later(fuse_ino_t ino);
  void invalidate_entries(std::stop_token stop);
  // GETATTR, answered from the node's recent attributes (Node::recent_attrs)
  // when a reply brought them within acregmin or acdirmin (never with noac).
  void getattr_then(fuse_req_t req, const std::shared_ptr<Node>& n);
  // Node::remember_attrs for the node of `fh`, if the kernel knows it.
  void remember_attrs(const nfs3::nfs_fh3& fh, const nfs3::post_op_attr& a);
  // A change that touches nodes it does not name (REMOVE, RENAME, LINK, or
  // the hidden name of an open file) is sent, or answered: every node's
  // recent attributes may be stale.
  void others_changed() { ++attrs_epoch_; }
  void read_chunk(fuse_req_t req, const std::shared_ptr<Node>& n, std::size_t size, off_t off,
                  const client::Identity& who);
  // An open file: I/O goes out with the opener's identity, as the kernel NFS
  // client sends it with the file's credentials (and no /proc read per I/O).
  struct OpenFile {
    client::Identity who;
    std::shared_ptr<Node> node;  // set once the open is counted (track_open)
    bool writable = false;
    WriteBack::ErrorsSeen seen;  // its file's write errors it was told of (set with node)
  };
  static OpenFile* opened(const fuse_file_info* fi) { return reinterpret_cast<OpenFile*>(fi->fh); }
  // Silly rename (fs_hidden.cpp): an open file that is removed or renamed
  // over is renamed to a hidden .nfsXXXX name in its directory instead, and
  // that name is removed at its last close, so the data stays reachable
  // through every open descriptor, as POSIX says and the kernel client does.
  void track_open(OpenFile& f, const std::shared_ptr<Node>& n);
  void closed_file(OpenFile& f);
  // `then(hidden, err)`: whether dir/name was an open file now hidden, or the
  // error hiding it met. Not open (or not found): (false, 0).
  void hide_if_open(const nfs3::nfs_fh3& dir, const std::string& name, const client::Identity& who,
                    std::function<void(bool, int)> then);
  // A SETATTR of `mode` alone that the server refused with EPERM: the reply
  // when it is the kernel clearing setuid/setgid before someone else's write
  // (the server does that itself on WRITE), else EPERM (fs_namespace.cpp).
  void refused_chmod(fuse_req_t req, const std::shared_ptr<Node>& n, std::uint32_t mode,
                     const client::Identity& who);
  // fs_lock.cpp. Takes or lets go of a lock of `owner` on [start, end]
  // (F_RDLCK, F_WRLCK or F_UNLCK), as the kernel client does around it: what
  // was written is committed before a lock goes, and the cached pages and
  // attributes are dropped once one is taken, so each side of a lock sees
  // the other's writes. Returns 0 or an errno; blocks the calling thread.
  int set_lock(fuse_req_t req, const std::shared_ptr<Node>& n, client::LockClient::Owner owner, short type,
               std::uint64_t start, std::uint64_t end, bool wait);
  // Commits `n`'s data, blocking: 0, EINTR, or when `tell` the last write
  // error `seen` (an open's, or none's) was not told of, which it marks told.
  int commit_now(const std::shared_ptr<Node>& n, WriteBack::ErrorsSeen seen, bool tell);
  struct DirHandle;
  // The kernel's next `size` bytes of listing from `off`, built under d.mu.
  // The reply goes out after d.mu is released: once the kernel has it, a
  // RELEASEDIR may delete `d` on another thread.
  std::vector<char> fill_dir(fuse_req_t req, DirHandle& d, std::size_t size, off_t off);
  // The node of `fh` had a change of ours sent after Node::changes() was
  // `seq`, or has writes on their way.
  bool changed_since(const nfs3::nfs_fh3& fh, std::uint64_t seq);
  using StoreEntries =
      std::function<void(nfs3::verf8, std::vector<nfs3::entryplus3>, bool, const nfs3::post_op_attr&)>;
  void fs_readdirplus_fallback(fuse_req_t req, const nfs3::nfs_fh3& dir, std::uint64_t cookie,
                               const nfs3::verf8& verf, const StoreEntries& store, const client::Identity& who);

  MountOptions options_;
  std::unique_ptr<client::NfsClient> nfs_;
  std::unique_ptr<Interrupts> interrupts_;
  std::unique_ptr<NodeTable> nodes_;
  std::unique_ptr<BufferPool> read_pool_, write_pool_, small_pool_;
  std::unique_ptr<WriteBack> writes_;
  // ORDER: after the nodes its monitor's on_lost looks up, so it goes first.
  std::unique_ptr<client::LockClient> locks_;  // null when both lock kinds are local
  Callers callers_;
  // An EXCLUSIVE CREATE's verifier: this mount's random start plus one per
  // create, unique within the mount and unlikely to match another's (a
  // random_device per create was 2% of the daemon's CPU in a `tar -x`).
  const std::uint64_t verifier_base_ = std::random_device{}() * 0x100000000ULL + std::random_device{}();
  std::atomic<std::uint64_t> exclusive_creates_{0};
  std::uint32_t name_max_ = 255;
  std::atomic<bool> readdirplus_;  // nordirplus, or cleared when the server answers NOTSUPP
  std::atomic<int> open_files_{0};          // opens counted by track_open, mount-wide
  std::atomic<std::uint32_t> hidden_seq_{0};  // makes each hidden name new
  std::atomic<std::uint64_t> attrs_epoch_{0};  // others_changed
  fuse_session* se_ = nullptr;
  std::mutex drop_mu_;
  std::condition_variable_any drop_cv_;
  std::vector<std::pair<fuse_ino_t, std::string>> drops_;  // entries to drop, guarded by drop_mu_
  bool dropping_ = false;  // guarded by drop_mu_: the invalidator runs
  std::jthread invalidator_;
};

// The errno a call that got no answer ends with: EINTR when its caller was
// killed (Interrupts), else EIO, as nfs(5) says of a soft mount's timeouts.
inline int call_errno(const Error& e) { return e.code == EINTR ? EINTR : EIO; }

// 0, or the errno a failed call or a result's NFS status becomes.
template <class Res>
int failed(const Result<Res>& r) {
  return !r ? call_errno(r.error()) : client::nfsstat3_to_errno(r->status);
}

}  // namespace nfsrdma::fuse
