#include "client/fuse/node_table.hpp"

#include <sys/stat.h>

#include <atomic>

namespace nfsrdma::fuse {

NodeTable::NodeTable(const nfs3::nfs_fh3& root) {
  auto n = std::make_shared<Node>();
  n->ino = FUSE_ROOT_ID;
  n->fh = root;
  n->nlookup = 1;  // the root is never forgotten
  by_ino_[FUSE_ROOT_ID] = n;
  by_fh_[key(root)] = FUSE_ROOT_ID;
}

std::shared_ptr<Node> NodeTable::get(fuse_ino_t ino) {
  std::lock_guard lk(mu_);
  auto it = by_ino_.find(ino);
  return it == by_ino_.end() ? nullptr : it->second;
}

std::shared_ptr<Node> NodeTable::find(const nfs3::nfs_fh3& fh) {
  std::lock_guard lk(mu_);
  auto it = by_fh_.find(key(fh));
  return it == by_fh_.end() ? nullptr : by_ino_.at(it->second);
}

std::shared_ptr<Node> NodeTable::remember(const nfs3::nfs_fh3& fh, std::uint64_t lookups) {
  std::lock_guard lk(mu_);
  auto [it, fresh] = by_fh_.try_emplace(key(fh), next_);
  if (fresh) {
    auto n = std::make_shared<Node>();
    n->ino = next_++;
    n->fh = fh;
    by_ino_[n->ino] = n;
  }
  auto& node = by_ino_.at(it->second);
  node->nlookup += lookups;
  return node;
}

void NodeTable::forget(fuse_ino_t ino, std::uint64_t lookups) {
  std::lock_guard lk(mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end() || ino == FUSE_ROOT_ID) return;
  auto& n = *it->second;
  n.nlookup -= std::min(lookups, n.nlookup);
  if (n.nlookup > 0) return;
  // Write-behind holds its own reference until its data is committed.
  n.dropped();
  unname(n);
  by_fh_.erase(key(n.fh));
  by_ino_.erase(it);
}

void NodeTable::unname(Node& n) {
  if (!n.parent) return;
  auto it = dir_names_.find(key(n.parent, n.name));
  if (it != dir_names_.end() && it->second == n.ino) dir_names_.erase(it);
  n.parent = 0;
  n.name.clear();
}

void NodeTable::named(Node& dir, fuse_ino_t parent, const std::string& name) {
  std::lock_guard lk(mu_);
  if (dir.parent == parent && dir.name == name) return;
  unname(dir);
  dir.parent = parent;
  dir.name = name;
  dir_names_[key(parent, name)] = dir.ino;
}

void NodeTable::renamed(fuse_ino_t parent, const std::string& name, fuse_ino_t newparent, const std::string& newname) {
  std::lock_guard lk(mu_);
  auto it = dir_names_.find(key(parent, name));
  if (it == dir_names_.end()) return;
  auto n = by_ino_.find(it->second);
  dir_names_.erase(it);
  if (n == by_ino_.end()) return;
  Node& dir = *n->second;
  dir.parent = newparent;
  dir.name = newname;
  dir_names_[key(newparent, newname)] = dir.ino;  // a directory renamed over is gone
}

std::optional<std::pair<fuse_ino_t, std::string>> NodeTable::entry_of(fuse_ino_t dir) {
  std::lock_guard lk(mu_);
  auto it = by_ino_.find(dir);
  if (it == by_ino_.end() || !it->second->parent) return std::nullopt;
  return std::pair{it->second->parent, it->second->name};
}

std::size_t NodeTable::size() {
  std::lock_guard lk(mu_);
  return by_ino_.size();
}

bool Node::cto_open(const nfs3::fattr3& a) {
  std::lock_guard lk(cto_mu_);
  const bool same = seen_ == Seen{a.size, a.mtime, a.ctime};
  seen_ = Seen{a.size, a.mtime, a.ctime};
  return same;
}

void Node::cto_created(const nfs3::fattr3& a) {
  std::lock_guard lk(cto_mu_);
  seen_ = Seen{a.size, a.mtime, a.ctime};
}

void Node::cto_follow(const nfs3::wcc_data& w) {
  if (!w.before || !w.after) return;
  std::lock_guard lk(cto_mu_);
  if (seen_ == Seen{w.before->size, w.before->mtime, w.before->ctime}) {
    seen_ = Seen{w.after->size, w.after->mtime, w.after->ctime};
  }
}

namespace {
bool older(const nfs3::nfstime3& x, const nfs3::nfstime3& y) {
  return x.seconds < y.seconds || (x.seconds == y.seconds && x.nseconds < y.nseconds);
}
// An epoch the mount's count never reaches: attributes kept in it are never recent.
constexpr std::uint64_t kNoEpoch = ~std::uint64_t{0};
}  // namespace

AttrsAsOf Node::attrs_as_of(std::uint64_t epoch) {
  std::lock_guard lk(attrs_mu_);
  return {epoch, forgot_at_};
}

void Node::remember_attrs(const nfs3::fattr3& a, AttrsAsOf as_of) {
  std::lock_guard lk(attrs_mu_);
  if (as_of.forgot_at != forgot_at_) return;
  const std::uint64_t epoch = as_of.epoch;
  // A reply that left the server before the one kept (an older ctime) is not
  // the node's latest state.
  if (attrs_ && attrs_epoch_ == epoch && older(a.ctime, attrs_->ctime)) return;
  // A directory that is not as our last change left it: changed elsewhere.
  if (listing_ && !listing_->shows(a)) {
    listing_drop_locked();
  } else if (listing_) {
    listing_->confirmed = std::chrono::steady_clock::now();  // the server says it is as we left it
  }
  attrs_ = a;
  attrs_at_ = std::chrono::steady_clock::now();
  attrs_epoch_ = epoch;
}

void Node::attrs_shown(const nfs3::fattr3& a) {
  std::lock_guard lk(attrs_mu_);
  // Older than our last change (an entry from a listing read before it): says nothing.
  if (listing_ && !listing_->shows(a) && !older(a.ctime, listing_->ctime)) listing_drop_locked();
  if (!attrs_) attrs_epoch_ = kNoEpoch;
  if (!attrs_ || older(attrs_->ctime, a.ctime)) attrs_ = a;
}

std::optional<nfs3::fattr3> Node::known_attrs() {
  std::lock_guard lk(attrs_mu_);
  return attrs_;
}

namespace {
std::atomic<std::uint64_t> all_changes{0};
std::atomic<std::uint64_t> dropped_change{0};  // the last change of a node the table let go
void raise(std::atomic<std::uint64_t>& a, std::uint64_t v) {
  for (auto cur = a.load(); cur < v && !a.compare_exchange_weak(cur, v);) {
  }
}
}  // namespace

std::uint64_t Node::changes() { return all_changes.load(); }

bool Node::changed_since(std::uint64_t seq) {
  std::lock_guard lk(attrs_mu_);
  return forgot_at_ > seq || answered_at_ > seq;
}

void Node::forget_attrs() { changing(0); }

AttrsAsOf Node::changing(std::uint64_t epoch) {
  std::lock_guard lk(attrs_mu_);
  forgot_at_ = ++all_changes;
  attrs_.reset();
  if (dropped_) raise(dropped_change, forgot_at_);
  return {epoch, forgot_at_};
}

void Node::change_answered() {
  std::lock_guard lk(attrs_mu_);
  answered_at_ = ++all_changes;
  if (dropped_) raise(dropped_change, answered_at_);
}

void Node::dropped() {
  std::lock_guard lk(attrs_mu_);
  dropped_ = true;
  raise(dropped_change, std::max(forgot_at_, answered_at_));
}

bool Node::dropped_changed_since(std::uint64_t seq) { return dropped_change.load() > seq; }

std::optional<nfs3::fattr3> Node::recent_attrs(std::uint64_t epoch, std::chrono::steady_clock::duration file_age,
                                               std::chrono::steady_clock::duration dir_age) {
  std::lock_guard lk(attrs_mu_);
  if (!attrs_ || attrs_epoch_ != epoch) return std::nullopt;
  auto max_age = attrs_->type == nfs3::NF3DIR ? dir_age : file_age;
  if (std::chrono::steady_clock::now() - attrs_at_ >= max_age) return std::nullopt;
  return attrs_;
}

namespace {
// Names every listing holds together, so the mount's memory for them stays
// bounded however many directories it makes.
constexpr std::size_t kMaxListedNames = 1 << 18;
std::atomic<std::size_t> listed_names{0};
}  // namespace

Node::~Node() { listing_drop_locked(); }

std::chrono::steady_clock::duration Node::names_cacheable(const nfs3::fattr3& dir,
                                                          std::chrono::steady_clock::duration max_age) {
  std::lock_guard lk(attrs_mu_);
  return names_cacheable_locked(owner_of(dir), max_age);
}

std::chrono::steady_clock::duration Node::names_cacheable_locked(const Owner& dir,
                                                                 std::chrono::steady_clock::duration max_age) const {
  if (dir.mode & S_IXOTH) return max_age;
  // Searchable by its group, it may have let root in as a squashing server's
  // anonymous group, which a root with other groups is not in.
  if (root_search_ != dir || (dir.mode & S_IXGRP)) return {};
  return std::max(max_age - (std::chrono::steady_clock::now() - root_search_at_), std::chrono::steady_clock::duration{});
}

void Node::root_searched(const nfs3::fattr3& dir) {
  std::lock_guard lk(attrs_mu_);
  root_search_ = owner_of(dir);
  root_search_at_ = std::chrono::steady_clock::now();
}

void Node::listing_start(const nfs3::fattr3& attrs) {
  std::lock_guard lk(attrs_mu_);
  listing_drop_locked();
  listing_.emplace();
  listing_->size = attrs.size;
  listing_->mtime = attrs.mtime;
  listing_->ctime = attrs.ctime;
  listing_->owner = owner_of(attrs);
  listing_->confirmed = std::chrono::steady_clock::now();
}

fuse_ino_t Node::listing_apply(const nfs3::wcc_data& wcc, const std::string* gone, const std::string* added,
                               fuse_ino_t added_ino) {
  std::lock_guard lk(attrs_mu_);
  if (!listing_) return 0;
  Listing& l = *listing_;
  const bool ours = wcc.before && wcc.after && l.shows(*wcc.before);
  if (!ours) {
    listing_drop_locked();
    return 0;
  }
  fuse_ino_t was = 0;
  if (auto it = gone ? l.names.find(*gone) : l.names.end(); it != l.names.end()) {
    was = it->second;
    l.names.erase(it);
    --listed_names;
  }
  if (added) {
    auto [it, fresh] = l.names.insert_or_assign(*added, added_ino ? added_ino : was);
    if (fresh && ++listed_names > kMaxListedNames) {
      listing_drop_locked();
      return was;
    }
  }
  if (l.names.size() > kMaxListing) {
    listing_drop_locked();
    return was;
  }
  l.size = wcc.after->size;
  l.mtime = wcc.after->mtime;
  l.ctime = wcc.after->ctime;
  l.owner = owner_of(*wcc.after);
  l.confirmed = std::chrono::steady_clock::now();
  return was;
}

void Node::listing_learn(const std::string& entry, fuse_ino_t node, const nfs3::post_op_attr& dir) {
  std::lock_guard lk(attrs_mu_);
  if (!listing_ || !dir || !listing_->shows(*dir)) return;
  if (auto it = listing_->names.find(entry); it != listing_->names.end()) it->second = node;
}

void Node::listing_drop() {
  std::lock_guard lk(attrs_mu_);
  listing_drop_locked();
}

void Node::listing_drop_locked() {
  if (listing_) listed_names -= listing_->names.size();
  listing_.reset();
}

std::optional<Node::Listed> Node::listing_find(const std::string& entry, std::chrono::steady_clock::duration max_age) {
  std::lock_guard lk(attrs_mu_);
  if (!listing_) return std::nullopt;
  const auto left = std::min(names_cacheable_locked(listing_->owner, max_age),
                             max_age - (std::chrono::steady_clock::now() - listing_->confirmed));
  if (left.count() <= 0) return std::nullopt;
  auto it = listing_->names.find(entry);
  if (it == listing_->names.end()) return Listed{false, 0, left};
  return Listed{true, it->second, left};
}

}  // namespace nfsrdma::fuse
