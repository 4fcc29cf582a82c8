// Filesystem: silly rename. NFSv3 has no open state, so a file removed on the
// server is gone even while a process here has it open; the kernel NFS client
// keeps it by renaming it to a hidden name instead and removing that at the
// last close. Same here. Only files open through this mount are hidden (the
// LOOKUP that finds out is skipped while nothing is open), nothing else is.
#include <fmt/format.h>

#include "client/core/errno_map.hpp"
#include "client/fuse/filesystem.hpp"
#include "lib/base/log.hpp"

namespace nfsrdma::fuse {

using namespace nfs3;

void Filesystem::track_open(OpenFile& f, const std::shared_ptr<Node>& n) {
  f.node = n;
  f.seen = writes_->errors_seen_now(*n);
  std::lock_guard lk(n->open_mu);
  ++n->opens;
  n->writers += f.writable;
  ++open_files_;
}

void Filesystem::closed_file(OpenFile& f) {
  if (!f.node) return;
  std::optional<Node::Hidden> gone;
  {
    std::lock_guard lk(f.node->open_mu);
    --open_files_;
    f.node->writers -= f.writable;
    if (--f.node->opens == 0) gone = std::exchange(f.node->hidden, std::nullopt);
  }
  if (!gone) return;
  // The hidden name goes whoever closed last, a killed process too: the
  // REMOVE is no caller's (client::CallOwner), so nothing cancels it.
  client::CallOwner nobody(0);
  // ORDER: data still on its way lands before its file goes.
  writes_->drain(f.node, [this, gone = std::move(*gone)] {
    others_changed();
    nfs_->call<WccRes>(Proc::REMOVE, diropargs3{gone.dir, gone.name}, [this, name = gone.name](Result<WccRes> r) {
      others_changed();
      if (int e = failed(r); e != 0 && e != ENOENT) {
        spdlog::warn("nfs: could not remove {} after its last close: {}", name, std::strerror(e));
      }
    }, &gone.who);
  });
}

void Filesystem::hide_if_open(const nfs_fh3& dir, const std::string& name, const client::Identity& who,
                              std::function<void(bool, int)> then) {
  if (open_files_ == 0) return then(false, 0);
  nfs_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir, name}, [this, dir, name, who, then](Result<LOOKUP3res> r) {
    if (failed(r)) return then(false, 0);  // the REMOVE or RENAME gets the server's answer itself
    auto n = nodes_->find(r->object);
    if (!n) return then(false, 0);
    {
      std::lock_guard lk(n->open_mu);
      if (n->opens == 0 || n->hidden) return then(false, 0);
    }
    // The server's fileid keeps two clients' hidden names apart; the sequence
    // number keeps ours apart.
    std::uint64_t id = r->obj_attributes ? r->obj_attributes->fileid : n->ino;
    std::string hidden = fmt::format(".nfs{:016x}{:08x}", id, ++hidden_seq_);
    RENAME3args a{{dir, name}, {dir, hidden}};
    others_changed();
    if (auto d = nodes_->find(dir)) d->listing_drop();  // a name the kernel never made
    nfs_->call<RENAME3res>(Proc::RENAME, a, [this, n, dir, hidden, who, then](Result<RENAME3res> rr) {
      others_changed();
      if (int e = failed(rr)) return then(false, e);
      bool closed_meanwhile;
      {
        std::lock_guard lk(n->open_mu);
        closed_meanwhile = n->opens == 0;
        if (!closed_meanwhile) n->hidden = Node::Hidden{dir, hidden, who};
      }
      then(true, 0);
      if (closed_meanwhile) {
        others_changed();
        nfs_->call<WccRes>(Proc::REMOVE, diropargs3{dir, hidden}, [this](Result<WccRes>) { others_changed(); }, &who);
      }
    }, &who);
  }, &who);
}

}  // namespace nfsrdma::fuse
