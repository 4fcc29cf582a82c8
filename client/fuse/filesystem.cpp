// Filesystem: connecting, the operations table, and the reply helpers the
// operations share.
#include "client/fuse/filesystem.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>

#include "client/core/errno_map.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/base/siphash.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;

namespace {
// READs in flight (kernel readahead included) and the write-behind window,
// in bytes: 32 and 64 chunks of 1 MiB, fewer when rsize or wsize is larger.
constexpr std::size_t kReadBytes = 32 << 20, kWriteBytes = 64 << 20;
constexpr std::size_t kSmallBytes = 64 << 10, kSmallChunks = 512;  // for small scattered writes
}  // namespace

Result<std::unique_ptr<Filesystem>> Filesystem::connect(MountOptions o) {
  auto nfs = client::NfsClient::connect(o.nfs);
  if (!nfs) return nfs.error();
  std::unique_ptr<Filesystem> fs(new Filesystem(std::move(o)));
  fs->nfs_ = std::move(*nfs);
  auto& c = *fs->nfs_;
  auto info = c.call_sync<FSINFO3res>(Proc::FSINFO, FhArgs{c.root()});
  if (!info) return info.error();
  if (info->status != NFS3_OK) {
    return Error{ErrorDomain::rpc, EIO, Action::fail, std::string("FSINFO: ") + nfsstat3_name(info->status)};
  }
  // rsize/wsize: what was asked, within the server's limits, in whole pages.
  auto fit = [](std::uint32_t want, std::uint32_t max) {
    std::uint32_t v = max ? std::min(want, max) : want;
    return v >= 4096 ? v & ~4095u : v;
  };
  fs->options_.rsize = fit(fs->options_.rsize, info->rtmax);
  fs->options_.wsize = fit(fs->options_.wsize, info->wtmax);
  if (auto pc = c.call_sync<PATHCONF3res>(Proc::PATHCONF, FhArgs{c.root()}); pc && pc->status == NFS3_OK) {
    fs->name_max_ = pc->name_max;
  }
  auto chunks = [](std::size_t bytes, std::size_t size) {
    return std::max<std::size_t>(8, bytes / std::max<std::size_t>(size, 1 << 20));
  };
  fs->read_pool_ = std::make_unique<BufferPool>(fs->options_.rsize, chunks(kReadBytes, fs->options_.rsize));
  fs->write_pool_ = std::make_unique<BufferPool>(fs->options_.wsize, chunks(kWriteBytes, fs->options_.wsize));
  fs->small_pool_ = std::make_unique<BufferPool>(std::min<std::size_t>(kSmallBytes, fs->options_.wsize), kSmallChunks);
  for (auto* pool : {fs->read_pool_.get(), fs->write_pool_.get(), fs->small_pool_.get()}) {
    if (auto r = c.register_memory(pool->region()); !r) return r.error();
  }
  fs->interrupts_ = std::make_unique<Interrupts>(c);
  fs->nodes_ = std::make_unique<NodeTable>(c.root());
  fs->writes_ = std::make_unique<WriteBack>(c, *fs->write_pool_, *fs->small_pool_, fs->attrs_epoch_);
  if (!fs->options_.local_posix_locks || !fs->options_.local_flock_locks) {
    // One lock client per mount, named after the host and the mount point:
    // a new instance on the same mount point takes over (and frees) the
    // locks a killed one left, while two mounts on one host stay apart.
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    const auto h = siphash24(SipKey{}, {reinterpret_cast<const std::uint8_t*>(fs->options_.mountpoint.data()),
                                        fs->options_.mountpoint.size()});
    client::LockClientOptions lo{fs->options_.nfs.host, fmt::format("{}-{:08x}", host, static_cast<std::uint32_t>(h)),
                                 fs->options_.nfs.resvport};
    // A lost lock's file: its cached pages go, so reads come to fs_read and fail.
    lo.on_lost = [f = fs.get()](const nfs3::nfs_fh3& fh) {
      auto n = f->nodes_->find(fh);
      if (n) n->forget_attrs();
      if (n && f->se_) fuse_lowlevel_notify_inval_inode(f->se_, n->ino, 0, 0);
    };
    fs->locks_ = std::make_unique<client::LockClient>(std::move(lo));
  }
  spdlog::info("mounted {}:{} ({})", fs->options_.nfs.host, fs->options_.nfs.export_path, describe(fs->options_));
  return fs;
}

Filesystem::~Filesystem() {
  if (interrupts_) interrupts_->stop();  // ORDER: before what its thread may touch goes
}

bool Filesystem::finish() {
  interrupts_->stop();  // no request is left to answer
  const auto done = writes_->commit_everything();
  if (done.files > done.failed) {
    spdlog::info("committed what {} file(s) held at the unmount", done.files - done.failed);
  }
  // ORDER: before the FUSE session and this object go. Calls still out (a
  // request the unmount aborted, the tail of a commit's reply) are answered
  // here, while what their callbacks reply to and touch is alive; no thread
  // calls in any more (the FUSE workers are joined, the flusher stopped).
  nfs_->shutdown();
  locks_.reset();  // its lock monitor's on_lost tells the session
  return done.failed == 0;
}

void Filesystem::fs_init(fuse_conn_info* conn) {
  // libfuse has set max_write to what its read buffer holds (1 MiB with
  // Linux's 256-page limit): never more, or reading the device fails. Larger
  // wsize still counts: the write-behind gathers writes into wsize WRITEs.
  conn->max_write = std::min(conn->max_write, options_.wsize);
  conn->max_read = options_.rsize;
  conn->want |= FUSE_CAP_ASYNC_READ | FUSE_CAP_READDIRPLUS | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_AUTO_INVAL_DATA |
                FUSE_CAP_SPLICE_READ;
  conn->want &= ~(FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_ATOMIC_O_TRUNC);
  // Without these the kernel keeps the locks itself, on this client only;
  // with them it asks, and the locks are the server's (fs_lock.cpp).
  if (options_.local_posix_locks) conn->want &= ~FUSE_CAP_POSIX_LOCKS;
  if (options_.local_flock_locks) conn->want &= ~FUSE_CAP_FLOCK_LOCKS;
  conn->want &= conn->capable;
  spdlog::debug("fuse: protocol 7.{}, capable {:#x}, want {:#x}", conn->proto_minor, conn->capable, conn->want);
}

void Filesystem::watch(fuse_req_t req) {
  fuse_req_interrupt_func(
      req, [](fuse_req_t r, void* i) { static_cast<Interrupts*>(i)->interrupted(fuse_req_ctx(r)->pid); },
      interrupts_.get());
}

std::shared_ptr<Node> Filesystem::node(fuse_req_t req, fuse_ino_t ino) {
  auto n = nodes_->get(ino);
  if (!n) fuse_reply_err(req, ESTALE);
  return n;
}

struct stat Filesystem::to_stat(const fattr3& a, Node* n) {
  struct stat st {};
  static constexpr mode_t kType[] = {0, S_IFREG, S_IFDIR, S_IFBLK, S_IFCHR, S_IFLNK, S_IFSOCK, S_IFIFO};
  auto t = static_cast<std::uint32_t>(a.type);
  st.st_mode = (t < 8 ? kType[t] : 0) | (a.mode & 07777);
  st.st_ino = a.fileid;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  if (n && a.type == NF3REG) {
    st.st_size = std::max<off_t>(st.st_size, static_cast<off_t>(writes_->pending_end(*n)));
  }
  st.st_blocks = static_cast<blkcnt_t>((a.used + 511) / 512);
  st.st_blksize = static_cast<blksize_t>(options_.wsize);
  st.st_rdev = makedev(a.rdev.specdata1, a.rdev.specdata2);
  st.st_atim = {a.atime.seconds, a.atime.nseconds};
  st.st_mtim = {a.mtime.seconds, a.mtime.nseconds};
  st.st_ctim = {a.ctime.seconds, a.ctime.nseconds};
  return st;
}

// The kernel NFS client's heuristic: attributes of a file that has not
// changed for a long time are trusted for longer, between the min and max.
double Filesystem::attr_timeout(const fattr3& a) const {
  if (options_.noac) return 0;
  bool dir = a.type == NF3DIR;
  double lo = dir ? options_.acdirmin_s : options_.acregmin_s;
  double hi = dir ? options_.acdirmax_s : options_.acregmax_s;
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double age = now - a.mtime.seconds;
  return std::clamp(age / 10, lo, hi);
}

void Filesystem::reply_attr(fuse_req_t req, const std::shared_ptr<Node>& n, const fattr3& a) {
  struct stat st = to_stat(a, n.get());
  fuse_reply_attr(req, &st, attr_timeout(a));
}

double Filesystem::entry_timeout(const post_op_attr& dir, fuse_ino_t dir_ino) const {
  if (options_.noac || options_.lookupcache == LookupCache::none || !dir) return 0;
  if (dir->mode & S_IXOTH) return options_.acdirmin_s;
  auto n = nodes_->get(dir_ino);
  if (!n) return 0;
  const auto left = n->names_cacheable(*dir, std::chrono::seconds(options_.acdirmin_s));
  return std::chrono::duration<double>(left).count();
}

fuse_entry_param Filesystem::entry_for(Node& n, const fattr3& a, fuse_ino_t parent, const std::string& name,
                                       const post_op_attr& dir) {
  fuse_entry_param e{};
  if (writes_->idle(n)) n.attrs_shown(a);  // else the size the kernel gets is the data's end, not the server's
  e.ino = n.ino;
  e.attr = to_stat(a, &n);
  e.attr_timeout = attr_timeout(a);
  e.entry_timeout = entry_timeout(dir, parent);
  if (a.type == NF3DIR) nodes_->named(n, parent, name);
  return e;
}

void Filesystem::reply_entry(fuse_req_t req, const nfs_fh3& fh, const fattr3& a, fuse_ino_t parent,
                             const std::string& name, const post_op_attr& dir, bool made_empty) {
  auto n = nodes_->remember(fh);
  if (made_empty) n->listing_start(a);  // before the kernel can make anything in it
  if (auto d = nodes_->get(parent)) d->listing_learn(name, n->ino, dir);
  fuse_entry_param e = entry_for(*n, a, parent, name, dir);
  if (fuse_reply_entry(req, &e) != 0) nodes_->forget(n->ino, 1);  // the kernel never got it
}

void Filesystem::attach(fuse_session* se) {
  {
    std::lock_guard lk(drop_mu_);
    dropping_ = se != nullptr;
    drops_.clear();
  }
  if (!se) {
    invalidator_ = {};  // joins
    se_ = nullptr;
    return;
  }
  se_ = se;
  invalidator_ = std::jthread([this](std::stop_token stop) { invalidate_entries(stop); });
}

void Filesystem::drop_entry_later(fuse_ino_t ino) {
  auto entry = nodes_->entry_of(ino);
  if (!entry) return;
  {
    std::lock_guard lk(drop_mu_);
    if (!dropping_) return;  // no session: no kernel cache to drop from
    drops_.push_back(std::move(*entry));
  }
  drop_cv_.notify_one();
}

void Filesystem::invalidate_entries(std::stop_token stop) {
  std::unique_lock lk(drop_mu_);
  while (drop_cv_.wait(lk, stop, [this] { return !drops_.empty(); })) {
    auto batch = std::exchange(drops_, {});
    lk.unlock();
    for (auto& [parent, name] : batch) {
      // ENOENT: the kernel had already let the name go.
      int rc = fuse_lowlevel_notify_inval_entry(se_, parent, name.c_str(), name.size());
      if (rc != 0 && rc != -ENOENT) spdlog::debug("dropping the cached entry {}: {}", name, std::strerror(-rc));
    }
    lk.lock();
  }
}

void Filesystem::getattr_then(fuse_req_t req, const std::shared_ptr<Node>& n) {
  using seconds = std::chrono::seconds;
  const seconds file_age(options_.noac ? 0 : options_.acregmin_s), dir_age(options_.noac ? 0 : options_.acdirmin_s);
  if (auto a = n->recent_attrs(attrs_epoch_, file_age, dir_age)) return reply_attr(req, n, *a);
  const auto as_of = n->attrs_as_of(attrs_epoch_);
  nfs_->call<GETATTR3res>(Proc::GETATTR, FhArgs{n->fh}, [this, req, n, as_of](Result<GETATTR3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    n->remember_attrs(r->obj_attributes, as_of);
    reply_attr(req, n, r->obj_attributes);
  }, nullptr);
}

void Filesystem::remember_attrs(const nfs_fh3& fh, const post_op_attr& a) {
  if (!a) return;
  // A directory's, from a change in it: the kernel holds the directory's
  // lock across the change, so none of ours to it was sent meanwhile.
  if (auto n = nodes_->find(fh)) n->remember_attrs(*a, n->attrs_as_of(attrs_epoch_));
}

namespace {

Filesystem& fs(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }

// A FUSE operation's name as a template argument (Enter<"flush">).
template <std::size_t N>
struct OpName {
  char s[N];
  constexpr OpName(const char (&v)[N]) { std::copy_n(v, N, s); }  // NOLINT: implicit, for the literal
};

// What every operation that may wait on the server starts with: its calls
// are its caller's, an interrupt is watched (Filesystem::watch), and it is
// counted by operation, its counter found once.
template <OpName op>
struct Enter {
  client::CallOwner owner;
  explicit Enter(fuse_req_t r) : owner(fuse_req_ctx(r)->pid) {
    static metrics::Counter& requests = metrics::registry().counter(
        "nfsrdma_fuse_requests_total", "Requests from the kernel's FUSE layer, by operation", {{"op", op.s}});
    requests.inc();
    fs(r).watch(r);
  }
};

const fuse_lowlevel_ops kOps = [] {
  fuse_lowlevel_ops o{};
  o.init = [](void* userdata, fuse_conn_info* conn) { static_cast<Filesystem*>(userdata)->fs_init(conn); };
  o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* name) { Enter<"lookup"> e(r); fs(r).fs_lookup(r, p, name); };
  o.forget = [](fuse_req_t r, fuse_ino_t ino, std::uint64_t n) {
    fs(r).fs_forget(ino, n);
    fuse_reply_none(r);
  };
  o.forget_multi = [](fuse_req_t r, std::size_t count, fuse_forget_data* list) {
    for (std::size_t i = 0; i < count; ++i) fs(r).fs_forget(list[i].ino, list[i].nlookup);
    fuse_reply_none(r);
  };
  o.getattr = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info*) { Enter<"getattr"> e(r); fs(r).fs_getattr(r, ino); };
  o.setattr = [](fuse_req_t r, fuse_ino_t ino, struct stat* a, int to_set, fuse_file_info* fi) {
    Enter<"setattr"> e(r);
    fs(r).fs_setattr(r, ino, a, to_set, fi);
  };
  o.readlink = [](fuse_req_t r, fuse_ino_t ino) { Enter<"readlink"> e(r); fs(r).fs_readlink(r, ino); };
  o.mknod = [](fuse_req_t r, fuse_ino_t p, const char* name, mode_t mode, dev_t rdev) {
    Enter<"mknod"> e(r);
    fs(r).fs_mknod(r, p, name, mode, rdev);
  };
  o.mkdir = [](fuse_req_t r, fuse_ino_t p, const char* name, mode_t mode) {
    Enter<"mkdir"> e(r);
    fs(r).fs_mkdir(r, p, name, mode);
  };
  o.unlink = [](fuse_req_t r, fuse_ino_t p, const char* name) {
    Enter<"unlink"> e(r);
    fs(r).fs_remove(r, p, name, Proc::REMOVE);
  };
  o.rmdir = [](fuse_req_t r, fuse_ino_t p, const char* name) {
    Enter<"rmdir"> e(r);
    fs(r).fs_remove(r, p, name, Proc::RMDIR);
  };
  o.symlink = [](fuse_req_t r, const char* target, fuse_ino_t p, const char* name) {
    Enter<"symlink"> e(r);
    fs(r).fs_symlink(r, target, p, name);
  };
  o.rename = [](fuse_req_t r, fuse_ino_t p, const char* name, fuse_ino_t np, const char* nname, unsigned flags) {
    Enter<"rename"> e(r);
    fs(r).fs_rename(r, p, name, np, nname, flags);
  };
  o.link = [](fuse_req_t r, fuse_ino_t ino, fuse_ino_t np, const char* nname) {
    Enter<"link"> e(r);
    fs(r).fs_link(r, ino, np, nname);
  };
  o.open = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi) { Enter<"open"> e(r); fs(r).fs_open(r, ino, fi); };
  o.create = [](fuse_req_t r, fuse_ino_t p, const char* name, mode_t mode, fuse_file_info* fi) {
    Enter<"create"> e(r);
    fs(r).fs_create(r, p, name, mode, fi);
  };
  o.read = [](fuse_req_t r, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi) {
    Enter<"read"> e(r);
    fs(r).fs_read(r, ino, size, off, fi);
  };
  o.write_buf = [](fuse_req_t r, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
    Enter<"write_buf"> e(r);
    fs(r).fs_write_buf(r, ino, in, off, fi);
  };
  o.flush = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi) { Enter<"flush"> e(r); fs(r).fs_flush(r, ino, fi); };
  o.fsync = [](fuse_req_t r, fuse_ino_t ino, int, fuse_file_info* fi) { Enter<"fsync"> e(r); fs(r).fs_fsync(r, ino, fi); };
  o.release = [](fuse_req_t r, fuse_ino_t, fuse_file_info* fi) { Enter<"release"> e(r); fs(r).fs_release(r, fi); };
  o.getlk = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi, struct flock* l) {
    Enter<"getlk"> e(r);
    fs(r).fs_getlk(r, ino, fi, l);
  };
  o.setlk = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi, struct flock* l, int sleep) {
    Enter<"setlk"> e(r);
    fs(r).fs_setlk(r, ino, fi, l, sleep);
  };
  o.flock = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi, int op) {
    Enter<"flock"> e(r);
    fs(r).fs_flock(r, ino, fi, op);
  };
  o.opendir = [](fuse_req_t r, fuse_ino_t ino, fuse_file_info* fi) {
    Enter<"opendir"> e(r);
    fs(r).fs_opendir(r, ino, fi);
  };
  o.readdirplus = [](fuse_req_t r, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi) {
    Enter<"readdirplus"> e(r);
    fs(r).fs_readdirplus(r, ino, size, off, fi);
  };
  o.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info* fi) {
    Enter<"releasedir"> e(r);
    fs(r).fs_releasedir(r, fi);
  };
  o.fsyncdir = [](fuse_req_t r, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(r, 0); };
  o.statfs = [](fuse_req_t r, fuse_ino_t ino) { Enter<"statfs"> e(r); fs(r).fs_statfs(r, ino); };
  return o;
}();

}  // namespace

const fuse_lowlevel_ops& Filesystem::operations() { return kOps; }

}  // namespace nfsrdma::fuse
