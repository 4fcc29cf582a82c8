// Filesystem: names and attributes (LOOKUP, GETATTR, SETATTR, the create and
// remove family, RENAME, LINK, READLINK, FSSTAT).
#include <sys/sysmacros.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "client/core/errno_map.hpp"
#include "client/fuse/filesystem.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;

namespace {

// The time to set. NFSv3 carries unsigned 32-bit seconds: a time before 1970
// or after 2106 is clamped to the nearest end, with no nanoseconds there, as
// the kernel's NFSv3 client does (its VFS clamps to the s_time_min and
// s_time_max it gives, 0 and 2^32 - 1).
set_time to_set_time(bool set, bool now, const timespec& t) {
  if (!set) return set_time{};
  if (now) return set_time{time_how::SET_TO_SERVER_TIME, {}};
  constexpr time_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (t.tv_sec <= 0 || t.tv_sec >= kMax) return set_time{time_how::SET_TO_CLIENT_TIME, {t.tv_sec <= 0 ? 0u : 0xffffffffu, 0}};
  return set_time{time_how::SET_TO_CLIENT_TIME,
                  {static_cast<std::uint32_t>(t.tv_sec), static_cast<std::uint32_t>(t.tv_nsec)}};
}

}  // namespace

void Filesystem::fs_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto dir = node(req, parent);
  if (!dir) return;
  if (std::strlen(name) > name_max_) return (void)fuse_reply_err(req, ENAMETOOLONG);
  if (options_.lookupcache != LookupCache::none && !options_.noac) {
    if (auto l = dir->listing_find(name, std::chrono::seconds(options_.acdirmin_s))) {
      if (!l->held && options_.lookupcache == LookupCache::all) {
        fuse_entry_param absent{};  // entry_timeout 0: the kernel asks again, and we know again
        return (void)fuse_reply_entry(req, &absent);
      }
      if (l->held && l->ino && entry_from_listing(req, parent, name, l->ino, l->left)) return;
    }
  }
  auto who = callers_.of(req);
  // Root with no group but 0, the least a squashing server grants root (it
  // keeps other groups): what it may search, every root caller may.
  const bool root = who.uid == 0 && who.gid == 0 && std::ranges::all_of(who.groups, [](auto g) { return g == 0; });
  const auto as_of = dir->attrs_as_of(attrs_epoch_);
  nfs_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir->fh, name}, [this, req, parent, dir, root, as_of,
                                                                    nm = std::string(name)](Result<LOOKUP3res> r) {
    // The directory's attributes confirm its listing, or show it changed.
    if (r && r->dir_attributes) dir->remember_attrs(*r->dir_attributes, as_of);
    // Found or not, the server let root search the directory.
    if (root && r && (r->status == NFS3_OK || r->status == NFS3ERR_NOENT) && r->dir_attributes) {
      dir->root_searched(*r->dir_attributes);
    }
    if (r && r->status == NFS3ERR_NOENT && options_.lookupcache == LookupCache::all) {
      // A negative entry, trusted as long as a name found there would be.
      fuse_entry_param none{};
      none.entry_timeout = entry_timeout(r->dir_attributes, parent);
      return (void)fuse_reply_entry(req, &none);
    }
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    if (r->obj_attributes) return reply_entry(req, r->object, *r->obj_attributes, parent, nm, r->dir_attributes);
    nfs_fh3 fh = r->object;
    nfs_->call<GETATTR3res>(Proc::GETATTR, FhArgs{fh}, [this, req, fh, parent, nm, da = r->dir_attributes](
                                                           Result<GETATTR3res> g) {
      if (int e = failed(g)) return (void)fuse_reply_err(req, e);
      reply_entry(req, fh, g->obj_attributes, parent, nm, da);
    });
  }, &who);
}

bool Filesystem::entry_from_listing(fuse_req_t req, fuse_ino_t parent, const std::string& name, fuse_ino_t ino,
                                    std::chrono::steady_clock::duration left) {
  auto known = nodes_->get(ino);
  // Data on its way moves the size the kernel holds past the server's.
  if (!known || !writes_->idle(*known)) return false;
  using seconds = std::chrono::seconds;
  auto a = known->recent_attrs(attrs_epoch_, seconds(options_.acregmin_s), seconds(options_.acdirmin_s));
  const bool recent = a.has_value();
  if (!recent) a = known->known_attrs();
  if (!a) return false;
  if (!recent && a->type == NF3REG) {
    // Kept attributes can be older than the kernel's when replies cross; a
    // size that went back would cut an open file's cached pages. With no
    // open, all it can drop is clean pages, read again after the next stat.
    std::lock_guard lk(known->open_mu);
    if (known->opens) return false;
  }
  auto n = nodes_->remember(known->fh);  // the kernel's lookup; a new node if it forgot this one meanwhile
  fuse_entry_param e{};
  e.ino = n->ino;
  e.attr = to_stat(*a, n.get());
  // Recent, they are what a GETATTR would be answered with (getattr_then);
  // else the kernel's own, or newer, and it asks before it uses them.
  e.attr_timeout = recent ? attr_timeout(*a) : 0;
  e.entry_timeout = std::chrono::duration<double>(left).count();
  if (a->type == NF3DIR) nodes_->named(*n, parent, name);
  if (fuse_reply_entry(req, &e) != 0) nodes_->forget(n->ino, 1);
  return true;
}

void Filesystem::fs_forget(fuse_ino_t ino, std::uint64_t n) { nodes_->forget(ino, n); }

void Filesystem::fs_getattr(fuse_req_t req, fuse_ino_t ino) {
  auto n = node(req, ino);
  if (!n) return;
  // Data still on its way would make the server's size look short.
  if (writes_->idle(*n)) return getattr_then(req, n);
  auto go = interrupts_->guard([this, req, n](int err) { err ? (void)fuse_reply_err(req, err) : getattr_then(req, n); });
  writes_->drain(n, [go] { go(0); }, true);
}

void Filesystem::fs_setattr(fuse_req_t req, fuse_ino_t ino, const struct stat* attr, int to_set,
                            fuse_file_info* fi) {
  auto n = node(req, ino);
  if (!n) return;
  SETATTR3args a;
  a.object = n->fh;
  sattr3& s = a.new_attributes;
  if (to_set & FUSE_SET_ATTR_MODE) s.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) s.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) s.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) s.size = static_cast<std::uint64_t>(attr->st_size);
  s.atime = to_set_time(to_set & FUSE_SET_ATTR_ATIME, to_set & FUSE_SET_ATTR_ATIME_NOW, attr->st_atim);
  s.mtime = to_set_time(to_set & FUSE_SET_ATTR_MTIME, to_set & FUSE_SET_ATTR_MTIME_NOW, attr->st_mtim);
  auto who = callers_.of(req);
  auto set = [this, req, n, a, who] {
    // ORDER: written data reaches the server before a truncate or chmod does.
    auto go = interrupts_->guard([this, req, n, a, who](int err) {
      if (err) return (void)fuse_reply_err(req, err);
      const auto as_of = n->changing(attrs_epoch_);
      nfs_->call<WccRes>(Proc::SETATTR, a, [this, req, n, a, who, as_of](Result<WccRes> r) {
        n->change_answered();
        const sattr3& sa = a.new_attributes;
        if (int e = failed(r)) {
          // Who may search it may have changed (a call killed or timed out
          // may still have been applied): no name is answered from before.
          if (sa.mode || sa.uid || sa.gid) {
            n->listing_drop();
            drop_entry_later(n->ino);
          }
          bool mode_only = sa.mode && !sa.uid && !sa.gid && !sa.size && sa.atime.how == time_how::DONT_CHANGE &&
                           sa.mtime.how == time_how::DONT_CHANGE;
          if (e == EPERM && mode_only) return refused_chmod(req, n, *sa.mode, who);
          return (void)fuse_reply_err(req, e);
        }
        if (sa.size) writes_->truncate(*n, *sa.size);  // before the size is reported
        // Who may search it changed, and others may not: walks through it ask
        // again (see the class comment). Opened to others (rsync and tar make
        // each directory 0700, then chmod it), every cached name stays good.
        if ((sa.mode || sa.uid || sa.gid) && !(r->wcc.after && (r->wcc.after->mode & S_IXOTH))) {
          drop_entry_later(n->ino);
        }
        // A directory's names stay as they were: its listing follows our
        // change (rsync makes each directory 0700, then chmods it at once),
        // if its size and mtime (unless set) show no one else's change: the
        // server's pre-op attributes need not be taken with the change.
        const auto& w = r->wcc;
        if (w.before && w.after && w.after->size == w.before->size &&
            (sa.mtime.how != time_how::DONT_CHANGE || w.after->mtime == w.before->mtime)) {
          n->listing_apply(w, nullptr, nullptr);
        } else {
          n->listing_drop();
        }
        n->cto_follow(r->wcc);  // a truncate cut the kernel's pages too
        if (!r->wcc.after) return getattr_then(req, n);
        n->remember_attrs(*r->wcc.after, as_of);
        reply_attr(req, n, *r->wcc.after);
      }, &who);
    });
    writes_->drain(n, [go] { go(0); }, true);
  };
  // truncate(2) by name needs write permission, which a server grants the
  // owner's SETATTR regardless of mode: ask first, as the kernel client does.
  // ftruncate and O_TRUNC come with an open file, checked when it was opened.
  if (!(to_set & FUSE_SET_ATTR_SIZE) || fi) return set();
  nfs_->call<ACCESS3res>(Proc::ACCESS, ACCESS3args{n->fh, ACCESS3_MODIFY}, [req, set](Result<ACCESS3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    if (!(r->access & ACCESS3_MODIFY)) return (void)fuse_reply_err(req, EACCES);
    set();
  }, &who);
}

void Filesystem::fs_readlink(fuse_req_t req, fuse_ino_t ino) {
  auto n = node(req, ino);
  if (!n) return;
  auto who = callers_.of(req);
  nfs_->call<READLINK3res>(Proc::READLINK, FhArgs{n->fh}, [req](Result<READLINK3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    fuse_reply_readlink(req, r->data.c_str());
  }, &who);
}

void Filesystem::reply_created(fuse_req_t req, const std::shared_ptr<Node>& dir, const std::string& name,
                               const CreateRes& res, fuse_file_info* fi) {
  remember_attrs(dir->fh, res.dir_wcc.after);
  auto finish = [this, req, parent = dir->ino, name, fi = fi ? std::optional<fuse_file_info>(*fi) : std::nullopt](
                    const nfs_fh3& fh, const fattr3& a, const post_op_attr& da, bool made_empty) {
    if (!fi) return reply_entry(req, fh, a, parent, name, da, made_empty);
    auto n = nodes_->remember(fh);
    fuse_entry_param e = entry_for(*n, a, parent, name, da);
    if (auto d = nodes_->get(parent)) d->listing_learn(name, n->ino, da);
    n->cto_created(a);
    fuse_file_info out = *fi;
    track_open(*opened(&out), n);
    if (fuse_reply_create(req, &e, &out) != 0) {
      nodes_->forget(n->ino, 1);
      closed_file(*opened(&out));
      delete opened(&out);
    }
  };
  if (res.obj && res.obj_attributes) {
    return finish(*res.obj, *res.obj_attributes, res.dir_wcc.after, res.obj_attributes->type == NF3DIR);
  }
  // The open's state dies with a failed reply (no release will come).
  auto fail = [req, open = fi ? opened(fi) : nullptr](int e) {
    delete open;
    fuse_reply_err(req, e);
  };
  auto who = callers_.of(req);
  nfs_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir->fh, name}, [this, finish, fail](Result<LOOKUP3res> r) {
    if (int e = failed(r)) return fail(e);
    if (r->obj_attributes) return finish(r->object, *r->obj_attributes, r->dir_attributes, false);
    nfs_fh3 fh = r->object;
    nfs_->call<GETATTR3res>(Proc::GETATTR, FhArgs{fh}, [fh, finish, fail, da = r->dir_attributes](
                                                           Result<GETATTR3res> g) {
      if (int e = failed(g)) return fail(e);
      finish(fh, g->obj_attributes, da, false);
    });
  }, &who);
}

void Filesystem::fs_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  auto dir = node(req, parent);
  if (!dir) return;
  auto who = callers_.of(req);
  std::string nm = name;
  auto done = [this, req, dir, nm](Result<CreateRes> r) {
    if (int e = failed(r)) {
      dir->listing_drop();  // no answer, or one that says the listing is wrong (EEXIST)
      return (void)fuse_reply_err(req, e);
    }
    dir->listing_apply(r->dir_wcc, nullptr, &nm);
    reply_created(req, dir, nm, *r);
  };
  dir->forget_attrs();
  if (S_ISREG(mode)) {
    CREATE3args a{{dir->fh, nm}, createmode3::GUARDED, {}, {}};
    a.obj_attributes.mode = mode & 07777;
    return nfs_->call<CreateRes>(Proc::CREATE, a, done, &who);
  }
  MKNOD3args a{{dir->fh, nm}, NF3FIFO, {}, {}};
  a.attributes.mode = mode & 07777;
  switch (mode & S_IFMT) {
    case S_IFIFO: a.type = NF3FIFO; break;
    case S_IFSOCK: a.type = NF3SOCK; break;
    case S_IFCHR: a.type = NF3CHR; break;
    case S_IFBLK: a.type = NF3BLK; break;
    default: return (void)fuse_reply_err(req, EINVAL);
  }
  a.spec = {major(rdev), minor(rdev)};
  nfs_->call<CreateRes>(Proc::MKNOD, a, done, &who);
}

void Filesystem::fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  auto dir = node(req, parent);
  if (!dir) return;
  auto who = callers_.of(req);
  MKDIR3args a{{dir->fh, name}, {}};
  a.attributes.mode = mode & 07777;
  dir->forget_attrs();
  nfs_->call<CreateRes>(Proc::MKDIR, a, [this, req, dir, nm = std::string(name)](Result<CreateRes> r) {
    if (int e = failed(r)) {
      dir->listing_drop();
      return (void)fuse_reply_err(req, e);
    }
    dir->listing_apply(r->dir_wcc, nullptr, &nm);
    reply_created(req, dir, nm, *r);
  }, &who);
}

void Filesystem::fs_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  auto dir = node(req, parent);
  if (!dir) return;
  auto who = callers_.of(req);
  SYMLINK3args a{{dir->fh, name}, {}, target};
  dir->forget_attrs();
  nfs_->call<CreateRes>(Proc::SYMLINK, a, [this, req, dir, nm = std::string(name)](Result<CreateRes> r) {
    if (int e = failed(r)) {
      dir->listing_drop();
      return (void)fuse_reply_err(req, e);
    }
    dir->listing_apply(r->dir_wcc, nullptr, &nm);
    reply_created(req, dir, nm, *r);
  }, &who);
}

void Filesystem::fs_remove(fuse_req_t req, fuse_ino_t parent, const char* name, Proc proc) {
  auto dir = node(req, parent);
  if (!dir) return;
  auto who = callers_.of(req);
  auto remove = [this, req, proc, dir, nm = std::string(name), who] {
    others_changed();  // the file's nlink and ctime
    dir->forget_attrs();
    nfs_->call<WccRes>(proc, diropargs3{dir->fh, nm}, [this, req, dir, nm](Result<WccRes> r) {
      others_changed();
      // A call that failed or went unanswered may still have changed it.
      if (r && r->status == NFS3_OK) {
        dir->listing_apply(r->wcc, &nm, nullptr);
      } else {
        dir->listing_drop();
      }
      if (r) remember_attrs(dir->fh, r->wcc.after);
      fuse_reply_err(req, failed(r));
    }, &who);
  };
  if (proc != Proc::REMOVE) return remove();
  hide_if_open(dir->fh, name, who, [req, remove](bool hidden, int err) {
    if (hidden || err) return (void)fuse_reply_err(req, err);
    remove();
  });
}

void Filesystem::fs_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                           const char* newname, unsigned int flags) {
  // RENAME_NOREPLACE and RENAME_EXCHANGE need an atomic check NFSv3 lacks:
  // refused, so callers fall back to a plain rename (as on a kernel NFSv3 mount).
  if (flags != 0) return (void)fuse_reply_err(req, EINVAL);
  auto from = node(req, parent);
  if (!from) return;
  auto to = node(req, newparent);
  if (!to) return;
  auto who = callers_.of(req);
  RENAME3args a{{from->fh, name}, {to->fh, newname}};
  // An open file renamed over is hidden first, so it stays readable.
  hide_if_open(to->fh, newname, who, [this, req, from, to, a, who](bool, int err) {
    if (err) return (void)fuse_reply_err(req, err);
    others_changed();  // the file's ctime, a directory's parent, a file renamed over
    from->forget_attrs();
    to->forget_attrs();
    nfs_->call<RENAME3res>(Proc::RENAME, a, [this, req, from, to, p = from->ino, np = to->ino, a](
                                                 Result<RENAME3res> r) {
      others_changed();
      if (r && r->status == NFS3_OK && from == to) {
        from->listing_apply(r->fromdir_wcc, &a.from.name, &a.to.name);
      } else if (r && r->status == NFS3_OK) {
        const fuse_ino_t moved = from->listing_apply(r->fromdir_wcc, &a.from.name, nullptr);
        to->listing_apply(r->todir_wcc, nullptr, &a.to.name, moved);
      } else {
        from->listing_drop();
        to->listing_drop();
      }
      if (r) {
        remember_attrs(a.from.dir, r->fromdir_wcc.after);
        remember_attrs(a.to.dir, r->todir_wcc.after);
      }
      int e = failed(r);
      if (!e) nodes_->renamed(p, a.from.name, np, a.to.name);
      fuse_reply_err(req, e);
    }, &who);
  });
}

void Filesystem::fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  auto n = node(req, ino);
  if (!n) return;
  auto dir = node(req, newparent);
  if (!dir) return;
  auto who = callers_.of(req);
  LINK3args a{n->fh, {dir->fh, newname}};
  others_changed();
  dir->forget_attrs();
  nfs_->call<LINK3res>(Proc::LINK, a, [this, req, n, dir, newparent, nm = a.link.name, dh = dir->fh](
                                           Result<LINK3res> r) {
    others_changed();
    if (int e = failed(r)) {
      dir->listing_drop();
      return (void)fuse_reply_err(req, e);
    }
    dir->listing_apply(r->linkdir_wcc, nullptr, &nm, n->ino);
    auto da = r->linkdir_wcc.after;
    remember_attrs(dh, da);
    if (r->file_attributes) return reply_entry(req, n->fh, *r->file_attributes, newparent, nm, da);
    nfs_->call<GETATTR3res>(Proc::GETATTR, FhArgs{n->fh}, [this, req, n, newparent, nm, da](Result<GETATTR3res> g) {
      if (int e = failed(g)) return (void)fuse_reply_err(req, e);
      reply_entry(req, n->fh, g->obj_attributes, newparent, nm, da);
    });
  }, &who);
}

void Filesystem::fs_statfs(fuse_req_t req, fuse_ino_t ino) {
  auto n = node(req, ino);
  if (!n) return;
  auto who = callers_.of(req);
  nfs_->call<FSSTAT3res>(Proc::FSSTAT, FhArgs{n->fh}, [this, req](Result<FSSTAT3res> r) {
    if (int e = failed(r)) return (void)fuse_reply_err(req, e);
    struct statvfs s {};
    constexpr std::uint64_t kFrag = 4096;
    s.f_bsize = options_.wsize;
    s.f_frsize = kFrag;
    s.f_blocks = r->tbytes / kFrag;
    s.f_bfree = r->fbytes / kFrag;
    s.f_bavail = r->abytes / kFrag;
    s.f_files = r->tfiles;
    s.f_ffree = r->ffiles;
    s.f_favail = r->afiles;
    s.f_namemax = name_max_;
    fuse_reply_statfs(req, &s);
  }, &who);
}

// Without FUSE_HANDLE_KILLPRIV (libfuse 3.14 never passes it to the kernel),
// a write by someone other than the owner makes the kernel send a SETATTR
// dropping setuid/setgid first, as the writer, which the server refuses. The
// server clears those bits itself when the WRITE lands, as nfsd does (it
// writes as the writer), so that refusal is answered with the mode the write
// leaves when it is one: only setuid/setgid dropped, by someone other than
// the owner, on a file open for writing here. Any other refusal stands.
void Filesystem::refused_chmod(fuse_req_t req, const std::shared_ptr<Node>& n, std::uint32_t mode,
                               const client::Identity& who) {
  nfs_->call<GETATTR3res>(Proc::GETATTR, FhArgs{n->fh}, [this, req, n, mode, who](Result<GETATTR3res> g) {
    if (failed(g)) return (void)fuse_reply_err(req, EPERM);
    fattr3 now = g->obj_attributes;
    constexpr std::uint32_t kPriv = S_ISUID | S_ISGID;
    std::uint32_t dropped = now.mode & ~mode & 07777;
    bool kill_priv = who.uid != 0 && now.uid != who.uid && dropped != 0 && !(dropped & ~kPriv) &&
                     !(mode & ~now.mode & 07777);
    if (kill_priv) {
      std::lock_guard lk(n->open_mu);
      kill_priv = n->writers > 0;
    }
    if (!kill_priv) return (void)fuse_reply_err(req, EPERM);
    now.mode = mode;
    reply_attr(req, n, now);
  });
}

}  // namespace nfsrdma::fuse
