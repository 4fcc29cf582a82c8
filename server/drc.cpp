#include "server/drc.hpp"

namespace nfsrdma::server {

std::size_t DuplicateRequestCache::KeyHash::operator()(const Key& k) const {
  std::size_t h = k.checksum ^ (std::size_t{k.xid} * 0x9e3779b97f4a7c15ULL);
  for (auto b : k.addr) h = h * 131 + b;
  return h ^ (std::size_t{k.proc} << 7);
}

DuplicateRequestCache::~DuplicateRequestCache() {
  if (budget_) budget_->release(rpc::MemoryBudget::drc, rpc::kShared, held_bytes_);
}

void DuplicateRequestCache::held_grew_locked(std::size_t bytes) {
  if (bytes == 0) return;
  held_bytes_ += bytes;
  if (budget_) budget_->charge(rpc::MemoryBudget::drc, rpc::kShared, bytes);
}

void DuplicateRequestCache::evict_locked(std::chrono::steady_clock::time_point now) {
  while (!lru_.empty()) {
    Entry& oldest = lru_.front();
    bool too_many = lru_.size() > capacity_;
    bool too_old = now - oldest.at > max_age_;
    if (!too_many && !too_old) break;
    index_.erase(oldest.key);
    spare_.splice(spare_.end(), lru_, lru_.begin());
  }
}

DuplicateRequestCache::Verdict DuplicateRequestCache::begin(const Key& key, std::vector<std::uint8_t>& reply) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard lk(mu_);
  evict_locked(now);
  if (auto it = index_.find(key); it != index_.end()) {
    if (!it->second->done) return Verdict::in_progress;
    ++hits_;
    reply = it->second->reply;
    return Verdict::replay;
  }
  if (spare_.empty()) {
    lru_.emplace_back();
    held_grew_locked(sizeof(Entry) + 4 * sizeof(void*) + sizeof(Key));  // the entry, its list and index nodes
  } else {
    lru_.splice(lru_.end(), spare_, spare_.begin());
  }
  Entry& e = lru_.back();
  e.key = key;
  e.done = false;
  e.reply.clear();
  e.at = now;
  index_.emplace(key, std::prev(lru_.end()));
  return Verdict::execute;
}

void DuplicateRequestCache::finish(const Key& key, const std::vector<std::uint8_t>& reply) {
  std::lock_guard lk(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  it->second->done = true;
  const std::size_t before = it->second->reply.capacity();
  it->second->reply = reply;
  held_grew_locked(it->second->reply.capacity() > before ? it->second->reply.capacity() - before : 0);
}

void DuplicateRequestCache::abandon(const Key& key) {
  std::lock_guard lk(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  spare_.splice(spare_.end(), lru_, it->second);
  index_.erase(it);
}

}  // namespace nfsrdma::server
