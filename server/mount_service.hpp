// The MOUNT program, version 3 (RFC 1813 Appendix I): hands out root file
// handles to allowed clients, and keeps the list DUMP reports.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "lib/nfs3/mount3.hpp"
#include "lib/rpc/budget.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/call_context.hpp"
#include "server/fs.hpp"

namespace nfsrdma::server {

// The mounts DUMP reports, as (client host, directory). A directory is kept as
// MNT walked it: the export's path and the rest normalised ("//", ".", ".."),
// so every spelling of one directory is one entry. Bounded: kPerHost entries
// per host and kTotal in all; past either the oldest entry of that host, or of
// all, makes room. The list is advisory (RFC 1813 Appendix I: DUMP, UMNT), so
// a full list never refuses a mount. Thread-safe.
class MountList {
 public:
  static constexpr std::size_t kPerHost = 64;
  static constexpr std::size_t kTotal = 4096;

  void add(const std::string& host, const std::string& dir);
  void remove(const std::string& host, const std::string& dir);
  void remove_host(const std::string& host);
  // The oldest first, as many as fit in `max_bytes` of DUMP reply.
  mount3::MountList dump(std::size_t max_bytes);
  // Charged to `budget` as it changes (bounded by the caps: counted, never
  // refused). Before the first add().
  void charge_to(rpc::MemoryBudget* budget) { budget_ = budget; }
  ~MountList();

 private:
  using Key = std::pair<std::string, std::string>;
  void erase_locked(std::list<Key>::iterator it);

  std::mutex mu_;  // guards everything below
  std::list<Key> order_;  // oldest first
  std::map<Key, std::list<Key>::iterator> index_;
  std::map<std::string, std::size_t> per_host_;
  std::size_t bytes_ = 0;  // what the entries hold, charged to budget_
  rpc::MemoryBudget* budget_ = nullptr;
};

// `path`'s components after an export's path: empty ones and "." dropped,
// ".." taking the previous one away but never climbing above the export.
std::vector<std::string> normalised_components(std::string_view rest);

class MountService {
 public:
  explicit MountService(const ExportTable& exports) : exports_(exports) {}

  rpc::AcceptStat handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& args, xdr::Encoder& out);
  MountList& mounts() { return mounts_; }

 private:
  mount3::MNT3res mnt(const CallContext& ctx, const std::string& path);
  // The directory `path` names as MNT records it: export path and normalised rest.
  std::string canonical(const std::string& path) const;

  const ExportTable& exports_;
  MountList mounts_;
};

}  // namespace nfsrdma::server
