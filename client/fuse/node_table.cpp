#include "client/fuse/node_table.hpp"

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
  by_fh_.erase(key(n.fh));
  by_ino_.erase(it);
}

std::size_t NodeTable::size() {
  std::lock_guard lk(mu_);
  return by_ino_.size();
}

}  // namespace nfsrdma::fuse
