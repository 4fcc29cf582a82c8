#include "server/open_files.hpp"

#include <algorithm>
#include <cstring>

#include "lib/base/metrics.hpp"

namespace nfsrdma::server {

namespace {
metrics::Gauge& open_gauge() {
  static metrics::Gauge& g = metrics::registry().gauge("nfsrdma_server_open_files",
                                                       "Descriptors kept open for READ, WRITE, COMMIT and LOOKUP");
  return g;
}
metrics::Counter& lookups(bool hit) {
  static metrics::Counter& hits = metrics::registry().counter(
      "nfsrdma_server_open_file_lookups_total", "READ, WRITE, COMMIT and LOOKUP calls by whether their file or directory was open",
      {{"result", "hit"}});
  static metrics::Counter& misses = metrics::registry().counter(
      "nfsrdma_server_open_file_lookups_total", "READ, WRITE, COMMIT and LOOKUP calls by whether their file or directory was open",
      {{"result", "miss"}});
  return hit ? hits : misses;
}
}  // namespace

OpenFiles::Key::Key(const nfs3::nfs_fh3& fh, Use use) : len_(std::min<std::size_t>(fh.len, nfs3::kFhSize) + 1) {
  std::memcpy(buf_, fh.data.data(), len_ - 1);
  buf_[len_ - 1] = static_cast<char>(use);
}

namespace {
constexpr OpenFiles::Use kUses[] = {OpenFiles::Use::read, OpenFiles::Use::write, OpenFiles::Use::path};
}  // namespace

OpenFiles::OpenFiles(std::size_t capacity, std::chrono::milliseconds idle)
    : capacity_(std::max<std::size_t>(capacity, 1)), idle_(idle) {
  reaper_ = std::jthread([this](std::stop_token stop) { reap(stop); });
}

OpenFiles::~OpenFiles() {
  reaper_ = {};  // joins before the entries go
  open_gauge().add(-static_cast<std::int64_t>(entries_.size()));
}

std::shared_ptr<const OpenFiles::File> OpenFiles::get(const nfs3::nfs_fh3& fh, Use use) {
  Key key(fh, use);
  std::lock_guard lk(mu_);
  auto it = entries_.find(key.view());
  lookups(it != entries_.end()).inc();
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  it->second.used = Clock::now();
  return it->second.file;
}

std::shared_ptr<const OpenFiles::File> OpenFiles::peek(const nfs3::nfs_fh3& fh, bool keep) {
  std::lock_guard lk(mu_);
  for (Use use : kUses) {
    auto it = entries_.find(Key(fh, use).view());
    if (it == entries_.end()) continue;
    if (keep) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      it->second.used = Clock::now();
    }
    return it->second.file;
  }
  return nullptr;
}

std::shared_ptr<const OpenFiles::File> OpenFiles::put(const nfs3::nfs_fh3& fh, Use use, File f) {
  Key key(fh, use);
  auto file = std::make_shared<const File>(std::move(f));
  std::vector<std::shared_ptr<const File>> closing;  // closed after the lock is released
  std::lock_guard lk(mu_);
  if (auto it = entries_.find(key.view()); it != entries_.end()) drop(it, closing);
  while (entries_.size() >= capacity_) drop(entries_.find(lru_.back()), closing);
  lru_.emplace_front(key.view());
  entries_.emplace(lru_.front(), Entry{file, lru_.begin(), Clock::now()});
  open_gauge().add(1);
  return file;
}

void OpenFiles::forget(const nfs3::nfs_fh3& fh) {
  std::vector<std::shared_ptr<const File>> closing;
  std::lock_guard lk(mu_);
  for (Use use : kUses) {
    if (auto it = entries_.find(Key(fh, use).view()); it != entries_.end()) drop(it, closing);
  }
}

std::size_t OpenFiles::size() {
  std::lock_guard lk(mu_);
  return entries_.size();
}

void OpenFiles::drop(std::unordered_map<std::string, Entry, Hash, std::equal_to<>>::iterator it,
                     std::vector<std::shared_ptr<const File>>& out) {
  out.push_back(std::move(it->second.file));
  lru_.erase(it->second.lru);
  entries_.erase(it);
  open_gauge().add(-1);
}

void OpenFiles::reap(std::stop_token stop) {
  std::unique_lock lk(mu_);
  while (!stop.stop_requested()) {
    reaper_cv_.wait_for(lk, stop, idle_ / 2, [] { return false; });
    std::vector<std::shared_ptr<const File>> closing;
    auto old = Clock::now() - idle_;
    while (!lru_.empty()) {
      auto it = entries_.find(lru_.back());
      if (it->second.used > old) break;
      drop(it, closing);
    }
    lk.unlock();
    closing.clear();
    lk.lock();
  }
}

}  // namespace nfsrdma::server
