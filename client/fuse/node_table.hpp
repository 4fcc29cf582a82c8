// Kernel inode numbers (FUSE node ids) to NFS file handles. A node lives while
// the kernel holds lookups on it (each entry reply counts one; FORGET gives
// them back) or while write-behind still works on it. Node ids are never
// reused, so the FUSE generation stays 0. The same file handle always maps to
// the same node, so hard links share one kernel inode as they do on nfsd.
#pragma once

#include <fuse_lowlevel.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "client/fuse/write_back.hpp"
#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::fuse {

struct Node {
  ~Node();
  fuse_ino_t ino = 0;
  nfs3::nfs_fh3 fh;
  std::uint64_t nlookup = 0;  // guarded by NodeTable's lock
  FileWrites writes;          // write-behind state, its own lock

  // Close-to-open: whether the kernel's cached pages are still the file's.
  // `seen` is the size and times of the last open (or create), moved on by
  // each change of ours that started from them, as the kernel client applies
  // its own changes' weak cache consistency data (nfs_wcc_update_inode):
  // the kernel's pages took our writes as they were made.
  // An open: true if the file is as last seen; `a` is seen from now on.
  bool cto_open(const nfs3::fattr3& a);
  void cto_created(const nfs3::fattr3& a);  // a new file: nothing cached to keep
  // Our WRITE or SETATTR: if it started from what was seen, its result is.
  void cto_follow(const nfs3::wcc_data& w);

  // Silly rename, as the kernel NFS client does it: the file's opens, and the
  // hidden name it was given when removed or renamed over while open, to be
  // removed at the last close (guarded by open_mu).
  struct Hidden {
    nfs3::nfs_fh3 dir;
    std::string name;
    client::Identity who;  // whoever removed it removes the hidden name
  };
  std::mutex open_mu;
  int opens = 0, writers = 0;  // writers: opens for writing
  std::optional<Hidden> hidden;

  // A directory's name, as the kernel last learnt it (guarded by NodeTable's
  // lock): its cached entry is dropped when its mode or owner changes.
  fuse_ino_t parent = 0;
  std::string name;

  // The attributes the server last gave for this node (a GETATTR, an open's
  // ACCESS, a change's post-op attributes), for a GETATTR the kernel asks
  // soon after it dropped its copy because of a change made through this
  // mount: the kernel NFS client keeps what such replies bring the same way.
  // `epoch`: Filesystem's count of changes that touch nodes they do not name
  // (REMOVE, RENAME, LINK), which makes everything kept before them stale.
  // `as_of`: when the call that brought them was sent. They are not kept if
  // a change of ours to the node was sent after it (forget_attrs counts
  // them, as the kernel client's attr_gencount): a reply the server made
  // before a WRITE, arriving after the WRITE went out, would report a size
  // the file no longer has once that WRITE is done.
  AttrsAsOf attrs_as_of(std::uint64_t epoch);
  void remember_attrs(const nfs3::fattr3& a, AttrsAsOf as_of);
  void forget_attrs();  // a change to it is on its way
  // A change of ours to it (WRITE, SETATTR) is being sent: forget_attrs, and
  // what its reply may be kept as of, under one lock. Its reply, whatever it
  // says, calls change_answered.
  AttrsAsOf changing(std::uint64_t epoch);
  void change_answered();
  // A mount-wide count of those events, and whether this node had one after
  // the count was `seq`: attributes the server read before its changes were
  // all answered (a listing's batch) may be older than the kernel's.
  static std::uint64_t changes();
  bool changed_since(std::uint64_t seq);
  // The kernel forgot it (NodeTable::forget): a change of it counts, from
  // now on, for every node not in the table (Filesystem::changed_since).
  void dropped();
  static bool dropped_changed_since(std::uint64_t seq);
  // The kept attributes if kept in `epoch` less than the age given for their
  // type (a directory's or a file's) ago.
  std::optional<nfs3::fattr3> recent_attrs(std::uint64_t epoch, std::chrono::steady_clock::duration file_age,
                                           std::chrono::steady_clock::duration dir_age);
  // The kernel was given `a` (an entry; not while writes are on their way):
  // kept attributes older than them (by ctime), or none kept, are replaced,
  // as recent as before (none: not recent at all). So the kept attributes are
  // no older than the kernel's, but for replies that cross. A listing they
  // do not match is dropped: the directory changed elsewhere.
  void attrs_shown(const nfs3::fattr3& a);
  // The kept attributes, however old or from whatever epoch.
  std::optional<nfs3::fattr3> known_attrs();

  // How long the names in this directory, whose attributes are `dir`, may be
  // cached, at most `max_age`: local root passes the kernel's checks
  // whatever the mode, while the server may treat it as nobody. So
  // `max_age` when others may search it; else, when its group may not
  // either (0700: root got in as its owner, or unsquashed, as every root
  // would), what is left of `max_age` since the server let root search it at
  // this mode and owner (root_searched: a LOOKUP as a root with no group but
  // 0, answered, found or not; the kernel client trusts a cached ACCESS
  // answer as long); else 0.
  std::chrono::steady_clock::duration names_cacheable(const nfs3::fattr3& dir,
                                                      std::chrono::steady_clock::duration max_age);
  void root_searched(const nfs3::fattr3& dir);

  // A directory's whole listing, while it is known (DESIGN.md "Listings of
  // directories made here"): from its MKDIR through this mount (empty; used
  // only while its names are cacheable), through every change of ours
  // whose weak cache consistency data shows the directory as our last change
  // left it. Anything else drops it for good: someone else's change, a change
  // of ours that failed or went unanswered, attributes seen that differ, a
  // silly rename, kMaxListing names. While kept, and confirmed less than
  // `max_age` ago, a LOOKUP of a name not in it needs no call: the FUSE
  // LOOKUP before every create or rename costs nothing, as the kernel
  // client's LOOKUP_EXCL and LOOKUP_RENAME_TARGET lookups do. Each name
  // keeps its node when known, so a LOOKUP of a name in it, the kernel's
  // entry expired, needs none either while the node's attributes are known:
  // the kernel client trusts its dentries while the directory is as its own
  // changes left it.
  static constexpr std::size_t kMaxListing = 65536;
  void listing_start(const nfs3::fattr3& attrs);
  // Our change to the directory: `gone` left it, `added` joined it (either
  // may be null; both for a SETATTR of the directory itself) as node
  // `added_ino`, or as the node `gone` was (a rename within it); 0: not
  // known yet. Returns the node `gone` was if the change was ours and the
  // listing knew it, else 0.
  fuse_ino_t listing_apply(const nfs3::wcc_data& wcc, const std::string* gone, const std::string* added,
                           fuse_ino_t added_ino = 0);
  // A reply named `entry`'s node, with the directory's attributes `dir`:
  // kept if the listing holds the name and is as `dir` shows it (a reply
  // from before a later change of ours teaches nothing).
  void listing_learn(const std::string& entry, fuse_ino_t node, const nfs3::post_op_attr& dir);
  void listing_drop();
  // What the listing says of `entry` while it may be used (kept, cacheable,
  // confirmed less than `max_age` ago): whether it holds the name, the node
  // if known, and how long the answer may be cached.
  struct Listed {
    bool held;
    fuse_ino_t ino;
    std::chrono::steady_clock::duration left;
  };
  std::optional<Listed> listing_find(const std::string& entry, std::chrono::steady_clock::duration max_age);

 private:
  struct Owner {
    std::uint32_t mode, uid, gid;
    bool operator==(const Owner&) const = default;
  };
  static Owner owner_of(const nfs3::fattr3& a) { return {a.mode, a.uid, a.gid}; }
  struct Listing {  // no member initializers: std::optional needs it default-constructible inside Node
    std::unordered_map<std::string, fuse_ino_t> names;  // to the node, 0 if not known
    std::uint64_t size;
    nfs3::nfstime3 mtime, ctime;
    Owner owner;  // as our last change left it (names_cacheable)
    std::chrono::steady_clock::time_point confirmed;
    // As `a` (attributes, or a change's pre-op attributes) shows the directory.
    bool shows(const auto& a) const { return a.size == size && a.mtime == mtime && a.ctime == ctime; }
  };
  std::chrono::steady_clock::duration names_cacheable_locked(const Owner& dir,
                                                             std::chrono::steady_clock::duration max_age) const;
  void listing_drop_locked();
  struct Seen {
    std::uint64_t size;
    nfs3::nfstime3 mtime, ctime;
    bool operator==(const Seen&) const = default;
  };
  std::mutex cto_mu_;
  std::optional<Seen> seen_;  // guarded by cto_mu_
  std::mutex attrs_mu_;  // guards the attributes and the listing
  std::optional<nfs3::fattr3> attrs_;
  std::chrono::steady_clock::time_point attrs_at_;
  std::uint64_t attrs_epoch_ = 0;
  std::uint64_t forgot_at_ = 0;   // changes() at the last forget_attrs
  std::uint64_t answered_at_ = 0; // and at the last change_answered
  bool dropped_ = false;
  std::optional<Listing> listing_;
  std::optional<Owner> root_search_;  // the mode and owner at root_searched()
  std::chrono::steady_clock::time_point root_search_at_;
};

class NodeTable {
 public:
  explicit NodeTable(const nfs3::nfs_fh3& root);

  // The node for `ino`, or null if the kernel named one it had forgotten.
  std::shared_ptr<Node> get(fuse_ino_t ino);
  // The node for `fh` if the kernel knows it, else null.
  std::shared_ptr<Node> find(const nfs3::nfs_fh3& fh);
  // The node for `fh`, made if new, with `lookups` more kernel references.
  std::shared_ptr<Node> remember(const nfs3::nfs_fh3& fh, std::uint64_t lookups = 1);
  void forget(fuse_ino_t ino, std::uint64_t lookups);
  // Directory names (only directories: a file's many links need none):
  // `dir` is parent/name now; a rename moves whatever directory was there.
  void named(Node& dir, fuse_ino_t parent, const std::string& name);
  void renamed(fuse_ino_t parent, const std::string& name, fuse_ino_t newparent, const std::string& newname);
  // The directory's parent and name, if known.
  std::optional<std::pair<fuse_ino_t, std::string>> entry_of(fuse_ino_t dir);
  std::size_t size();

 private:
  static std::string key(const nfs3::nfs_fh3& fh) {
    return {reinterpret_cast<const char*>(fh.data.data()), fh.len};
  }
  static std::string key(fuse_ino_t parent, const std::string& name) { return std::to_string(parent) + '/' + name; }
  void unname(Node& n);  // with mu_ held
  std::mutex mu_;  // guards the maps, next_ and every Node::nlookup
  std::unordered_map<fuse_ino_t, std::shared_ptr<Node>> by_ino_;
  std::unordered_map<std::string, fuse_ino_t> by_fh_;
  std::unordered_map<std::string, fuse_ino_t> dir_names_;  // parent ino '/' name -> directory
  fuse_ino_t next_ = FUSE_ROOT_ID + 1;
};

}  // namespace nfsrdma::fuse
