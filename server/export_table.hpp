// The exports being served, and their replacement while serving (SIGHUP).
// An export is known by its path for the server's life: a reload updates the
// clients and options of exports it keeps (the next call sees them), adds new
// ones, and withdraws the ones it leaves out (their handles become STALE,
// MOUNT no longer finds them; listing them again brings them back, with the
// same handles). Calls read the table without locks: an Export is never
// freed, and neither is any version of its entry, so a call that looked one
// up keeps using what it saw. Only the administrator's reloads add to that.
#pragma once

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/base/metrics.hpp"
#include "lib/nfs3/nfs3_types.hpp"
#include "lib/base/fd.hpp"
#include "server/exports.hpp"
#include "server/file_handle.hpp"

namespace nfsrdma::server {

struct Export {
  std::uint32_t id = 0;   // in every handle; also the fsid clients see
  Fd root;                // O_PATH directory
  Fd mount_fd;            // O_RDONLY: open_by_handle_at refuses O_PATH descriptors
  int mount_id = 0;       // handles from another mount are refused
  dev_t root_dev = 0;
  ino_t root_ino = 0;
  // tmpfs (an export never crosses into another filesystem; ramfs gives no
  // file handles, so is never exported): its pages are memory, so nothing on
  // it waits for a disk but swap, and nothing on it can be committed to one;
  // Linux before 6.6 refuses RWF_NOWAIT there.
  bool in_memory = false;
  nfs3::nfs_fh3 root_fh;
  metrics::Counter* read_bytes = nullptr;   // file data read and written through it,
  metrics::Counter* write_bytes = nullptr;  // nfsrdma_server_export_bytes_total{export=PATH}

  // Its path (canonical), clients and options, as the last reload left them.
  const ExportEntry& entry() const { return *entry_.load(std::memory_order_acquire); }
  bool withdrawn() const { return withdrawn_.load(std::memory_order_acquire); }

  std::atomic<const ExportEntry*> entry_{nullptr};
  std::atomic<bool> withdrawn_{false};
};

class ExportTable {
 public:
  static constexpr std::size_t kMaxExports = 1024;

  explicit ExportTable(const SipKey& key) : codec_(key) {}

  // Serves exactly `entries` from now on. All or nothing: any entry that
  // cannot be served (missing directory, no file handles, a clash of ids or
  // paths, a changed fsid) leaves the table as it was. Says what changed.
  Result<std::string> replace(std::vector<ExportEntry> entries);

  const Export* by_id(std::uint32_t id) const;  // nullptr when unknown or withdrawn
  std::vector<const Export*> all() const;  // those served now
  const HandleCodec& codec() const { return codec_; }

 private:
  Result<std::unique_ptr<Export>> open(const ExportEntry& entry) const;
  Export* find_path(const std::string& path) const;

  HandleCodec codec_;
  std::mutex mu_;  // one replace() at a time; readers never take it
  std::array<std::atomic<Export*>, kMaxExports> slots_{};
  std::atomic<std::size_t> count_{0};
  std::vector<std::unique_ptr<Export>> owned_;               // guarded by mu_
  std::vector<std::unique_ptr<const ExportEntry>> entries_;  // every version, guarded by mu_
};

}  // namespace nfsrdma::server
