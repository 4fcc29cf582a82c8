#include "server/export_table.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

#include "lib/base/siphash.hpp"
#include "server/fs.hpp"

namespace nfsrdma::server {

using namespace nfs3;

namespace {
Error config(std::string why) { return Error{ErrorDomain::config, 0, Action::fail, std::move(why)}; }
}  // namespace

Result<std::unique_ptr<Export>> ExportTable::open(const ExportEntry& entry) const {
  Fd root(::open(entry.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return sys_error(errno, "export " + entry.path);
  struct stat st {};
  if (::fstat(root.get(), &st) != 0) return sys_error(errno, "export " + entry.path);
  auto ex = std::make_unique<Export>();
  ex->id = entry.fsid ? *entry.fsid
                      : static_cast<std::uint32_t>(siphash24(SipKey{}, {reinterpret_cast<const std::uint8_t*>(
                                                                             entry.path.data()),
                                                                         entry.path.size()}));
  KernelHandle kh;
  if (auto s = kernel_handle(root.get(), "", AT_EMPTY_PATH, kh, ex->mount_id); s != NFS3_OK) {
    return config("export " + entry.path + ": its filesystem cannot give file handles (" + nfsstat3_name(s) + ")");
  }
  ex->mount_fd = Fd(::open(entry.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!ex->mount_fd.valid()) return sys_error(errno, "export " + entry.path);
  ex->root_dev = st.st_dev;
  struct statfs fs {};
  ex->in_memory = ::fstatfs(ex->mount_fd.get(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  ex->root_ino = st.st_ino;
  ex->root = std::move(root);
  ex->root_fh = codec_.encode(ex->id, kh);
  for (bool written : {false, true}) {
    (written ? ex->write_bytes : ex->read_bytes) = &metrics::registry().counter(
        "nfsrdma_server_export_bytes_total", "File data read and written, by export",
        {{"export", entry.path}, {"op", written ? "write" : "read"}});
  }
  return ex;
}

Export* ExportTable::find_path(const std::string& path) const {
  std::size_t n = count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    Export* e = slots_[i].load(std::memory_order_acquire);
    if (e->entry().path == path) return e;
  }
  return nullptr;
}

Result<std::string> ExportTable::replace(std::vector<ExportEntry> entries) {
  std::lock_guard lk(mu_);
  // First everything that can fail, touching nothing.
  std::map<std::uint32_t, std::string> ids;  // id -> path, of every export known, kept or new
  std::size_t n = count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    const Export* e = slots_[i].load(std::memory_order_relaxed);
    ids[e->id] = e->entry().path;
  }
  // An empty file on a reload is far more often a mistake (an editor's empty
  // save, a file truncated by a failed deploy) than a wish to cut every client
  // off at once: nfsrdma-server(8) keeps the running exports then.
  if (entries.empty() && n > 0) {
    return config("no export listed: the running exports stay (stop the server to serve nothing)");
  }
  std::vector<Export*> kept(entries.size(), nullptr);
  std::vector<std::unique_ptr<Export>> added(entries.size());
  std::map<std::string, std::size_t> paths;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    ExportEntry& entry = entries[i];
    char real[PATH_MAX];
    if (!::realpath(entry.path.c_str(), real)) return sys_error(errno, "export " + entry.path);
    entry.path = real;
    if (!paths.emplace(entry.path, i).second) return config("export " + entry.path + " given twice");
    if ((kept[i] = find_path(entry.path))) {
      if (entry.fsid && *entry.fsid != kept[i]->id) {
        return config("export " + entry.path + ": fsid cannot change while it is served (its clients hold handles "
                      "with the old one); restart the server to change it");
      }
      continue;
    }
    auto ex = open(entry);
    if (!ex) return ex.error();
    auto [at, fresh] = ids.emplace((*ex)->id, entry.path);
    if (!fresh) {
      return config("exports " + at->second + " and " + entry.path + " share an id; give one an explicit fsid=");
    }
    added[i] = std::move(*ex);
  }
  if (n + static_cast<std::size_t>(std::count_if(added.begin(), added.end(), [](auto& a) { return a != nullptr; })) >
      kMaxExports) {
    return config("more than " + std::to_string(kMaxExports) + " exports");
  }

  // Then the change: entries first, so no reader ever sees an export without one.
  std::size_t n_kept = 0, n_added = 0, n_withdrawn = 0;
  std::vector<bool> listed(n, false);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries_.push_back(std::make_unique<const ExportEntry>(std::move(entries[i])));
    Export* ex = kept[i] ? kept[i] : added[i].get();
    ex->entry_.store(entries_.back().get(), std::memory_order_release);
    ex->withdrawn_.store(false, std::memory_order_release);
    if (kept[i]) {
      ++n_kept;
      for (std::size_t j = 0; j < n; ++j) listed[j] = listed[j] || slots_[j].load(std::memory_order_relaxed) == ex;
    } else {
      slots_[count_.load(std::memory_order_relaxed)].store(ex, std::memory_order_release);
      count_.fetch_add(1, std::memory_order_release);
      owned_.push_back(std::move(added[i]));
      ++n_added;
    }
  }
  for (std::size_t j = 0; j < n; ++j) {
    Export* ex = slots_[j].load(std::memory_order_relaxed);
    if (!listed[j] && !ex->withdrawn()) {
      ex->withdrawn_.store(true, std::memory_order_release);
      ++n_withdrawn;
    }
  }
  return std::to_string(n_kept) + " kept, " + std::to_string(n_added) + " added, " + std::to_string(n_withdrawn) +
         " withdrawn";
}

const Export* ExportTable::by_id(std::uint32_t id) const {
  std::size_t n = count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    const Export* e = slots_[i].load(std::memory_order_acquire);
    if (e->id == id) return e->withdrawn() ? nullptr : e;
  }
  return nullptr;
}

std::vector<const Export*> ExportTable::all() const {
  std::vector<const Export*> out;
  std::size_t n = count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    const Export* e = slots_[i].load(std::memory_order_acquire);
    if (!e->withdrawn()) out.push_back(e);
  }
  return out;
}

}  // namespace nfsrdma::server
