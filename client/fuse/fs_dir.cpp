// Filesystem: directory listings. One READDIRPLUS fetches a large batch
// (many kernel readdir calls' worth); the kernel's readdir offsets are the
// NFS cookies, so a listing resumes wherever the kernel asks. Servers without
// READDIRPLUS get READDIR, and entries then carry no attributes.
#include <optional>

#include "client/core/errno_map.hpp"
#include "client/fuse/filesystem.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;

namespace {
constexpr std::uint32_t kDirCount = 32 * 1024;   // READDIRPLUS dircount
constexpr std::uint32_t kMaxCount = 256 * 1024;  // and maxcount: the reply's size
}  // namespace

struct Filesystem::DirHandle {
  nfs_fh3 dir;
  fuse_ino_t ino = 0;
  post_op_attr dir_attributes;  // with the batch: its entries' timeout needs the mode
  std::mutex mu;  // the kernel serialises readdir per open directory; this orders memory
  verf8 verf{};
  std::vector<entryplus3> batch;  // entries after cookie `start`
  std::uint64_t fetched_at = 0;   // Node::changes() when the batch was asked for
  std::uint64_t start = 0;
  bool eof = false, valid = false;
};

void Filesystem::fs_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  auto* d = new DirHandle;
  d->dir = n->fh;
  d->ino = ino;
  fi->fh = reinterpret_cast<std::uint64_t>(d);
  if (fuse_reply_open(req, fi) != 0) delete d;
}

void Filesystem::fs_releasedir(fuse_req_t req, fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void Filesystem::fs_readdirplus(fuse_req_t req, fuse_ino_t, std::size_t size, off_t off, fuse_file_info* fi) {
  auto& d = *reinterpret_cast<DirHandle*>(fi->fh);
  auto cookie = static_cast<std::uint64_t>(off);
  std::optional<std::vector<char>> cached;
  {
    std::lock_guard lk(d.mu);
    // A read from the start (opendir, rewinddir) sees the directory as it is now.
    bool covered = d.valid && cookie != 0 && (cookie == d.start || std::any_of(d.batch.begin(), d.batch.end(),
                                                                [&](auto& e) { return e.cookie == cookie; }));
    bool at_end = d.valid && (d.batch.empty() ? cookie == d.start : d.batch.back().cookie == cookie);
    if (covered && !(at_end && !d.eof)) cached = fill_dir(req, d, size, off);
  }
  if (cached) return (void)fuse_reply_buf(req, cached->data(), cached->size());
  auto who = callers_.of(req);
  auto dir = nodes_->get(d.ino);
  const auto as_of = dir ? dir->attrs_as_of(attrs_epoch_) : AttrsAsOf{};
  const std::uint64_t asked_at = Node::changes();
  auto store = [this, req, &d, size, off, cookie, dir, as_of, asked_at](
                   verf8 verf, std::vector<entryplus3> entries, bool eof, const post_op_attr& dir_attributes) {
    // They confirm the directory's listing, or show it changed elsewhere.
    if (dir && dir_attributes) dir->remember_attrs(*dir_attributes, as_of);
    std::vector<char> listing;
    {
      std::lock_guard lk(d.mu);
      d.dir_attributes = dir_attributes;
      d.verf = verf;
      d.batch = std::move(entries);
      d.fetched_at = asked_at;
      d.start = cookie;
      d.eof = eof || d.batch.empty();
      d.valid = true;
      listing = fill_dir(req, d, size, off);
    }
    fuse_reply_buf(req, listing.data(), listing.size());
  };
  verf8 verf = cookie == 0 ? verf8{} : d.verf;
  if (readdirplus_) {
    READDIRPLUS3args a{d.dir, cookie, verf, kDirCount, kMaxCount};
    return nfs_->call<READDIRPLUS3res>(Proc::READDIRPLUS, a, [this, req, store, a, who](Result<READDIRPLUS3res> r) {
      if (r && r->status == NFS3ERR_NOTSUPP) {
        readdirplus_ = false;
        return fs_readdirplus_fallback(req, a.dir, a.cookie, a.cookieverf, store, who);
      }
      if (int e = failed(r)) return (void)fuse_reply_err(req, e);
      store(r->cookieverf, std::move(r->entries), r->eof, r->dir_attributes);
    }, &who);
  }
  fs_readdirplus_fallback(req, d.dir, cookie, verf, store, who);
}

void Filesystem::fs_readdirplus_fallback(fuse_req_t req, const nfs_fh3& dir, std::uint64_t cookie, const verf8& verf,
                                         const StoreEntries& store, const client::Identity& who) {
  READDIR3args a{dir, cookie, verf, kMaxCount};
  nfs_->call<READDIR3res>(Proc::READDIR, a, [req, store](Result<READDIR3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    std::vector<entryplus3> plus;
    plus.reserve(r->entries.size());
    for (auto& e : r->entries) plus.push_back(entryplus3{e.fileid, std::move(e.name), e.cookie, {}, {}});
    store(r->cookieverf, std::move(plus), r->eof, r->dir_attributes);
  }, &who);
}

bool Filesystem::changed_since(const nfs_fh3& fh, std::uint64_t seq) {
  auto n = nodes_->find(fh);
  if (!n) return Node::dropped_changed_since(seq);  // it may be one the kernel let go since
  return n->changed_since(seq) || !writes_->idle(*n);
}

// Called with d.mu held.
std::vector<char> Filesystem::fill_dir(fuse_req_t req, DirHandle& d, std::size_t size, off_t off) {
  auto cookie = static_cast<std::uint64_t>(off);
  std::size_t i = 0;
  if (cookie != d.start) {
    while (i < d.batch.size() && d.batch[i].cookie != cookie) ++i;
    ++i;  // the entry after the one the kernel last took
  }
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (; i < d.batch.size(); ++i) {
    const entryplus3& ent = d.batch[i];
    fuse_entry_param e{};
    std::shared_ptr<Node> n;
    bool dots = ent.name == "." || ent.name == "..";
    // A node changed through the mount since the batch was asked for (a
    // WRITE, a SETATTR): its attributes there may be older than the
    // kernel's, and a size moved back would cut its pages and misplace an
    // O_APPEND write.
    if (ent.name_attributes && ent.name_handle && !dots && !changed_since(*ent.name_handle, d.fetched_at)) {
      n = nodes_->remember(*ent.name_handle);  // fuse_add_direntry_plus counts one lookup
      e = entry_for(*n, *ent.name_attributes, d.ino, ent.name, d.dir_attributes);
    } else if (ent.name_attributes) {
      e.attr = to_stat(*ent.name_attributes);  // no node: the kernel takes the type only
      e.attr_timeout = attr_timeout(*ent.name_attributes);
      e.entry_timeout = entry_timeout(d.dir_attributes, d.ino);
    }
    e.attr.st_ino = ent.fileid;
    std::size_t need = fuse_add_direntry_plus(req, buf.data() + used, size - used, ent.name.c_str(), &e,
                                              static_cast<off_t>(ent.cookie));
    if (need > size - used) {
      if (n) nodes_->forget(n->ino, 1);  // did not fit: the kernel never sees it
      break;
    }
    used += need;
  }
  buf.resize(used);
  return buf;
}

}  // namespace nfsrdma::fuse
