#include "server/mount_service.hpp"

#include <arpa/inet.h>

#include <algorithm>

#include "lib/base/log.hpp"

namespace nfsrdma::server {

using namespace mount3;

namespace {

// A DUMP reply's list is cut to this: room for a thousand long paths.
constexpr std::size_t kDumpReplyBytes = 1u << 20;

std::string host_of(const rpc::Peer& p) {
  std::string s = p.describe();
  if (!s.empty() && s[0] == '[') return s.substr(1, s.find(']') - 1);
  return s.substr(0, s.rfind(':'));
}

mountstat3 to_mountstat(nfs3::nfsstat3 s) {
  switch (s) {
    case nfs3::NFS3ERR_NOENT: return MNT3ERR_NOENT;
    case nfs3::NFS3ERR_ACCES: return MNT3ERR_ACCES;
    case nfs3::NFS3ERR_NOTDIR: return MNT3ERR_NOTDIR;
    case nfs3::NFS3ERR_NAMETOOLONG: return MNT3ERR_NAMETOOLONG;
    case nfs3::NFS3ERR_PERM: return MNT3ERR_PERM;
    default: return MNT3ERR_IO;
  }
}

// The export that is the longest prefix of `path`, and the rest of it.
std::pair<const Export*, std::string_view> export_of(const ExportTable& exports, std::string_view path) {
  const Export* ex = nullptr;
  std::string_view rest;
  for (const auto& e : exports.all()) {
    const std::string& p = e->entry().path;
    bool prefix = path.compare(0, p.size(), p) == 0 &&
                  (path.size() == p.size() || path[p.size()] == '/' || p == "/");
    if (prefix && (!ex || p.size() > ex->entry().path.size())) {
      ex = e;
      rest = path.substr(p.size());
    }
  }
  return {ex, rest};
}

std::string joined(std::string dir, const std::vector<std::string>& comps) {
  for (const auto& c : comps) {
    if (dir.empty() || dir.back() != '/') dir += '/';
    dir += c;
  }
  return dir;
}

}  // namespace

std::vector<std::string> normalised_components(std::string_view rest) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < rest.size()) {
    std::size_t next = rest.find('/', at);
    if (next == std::string_view::npos) next = rest.size();
    std::string_view comp = rest.substr(at, next - at);
    at = next + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.emplace_back(comp);
  }
  return out;
}

void MountList::add(const std::string& host, const std::string& dir) {
  std::lock_guard lk(mu_);
  Key key{host, dir};
  if (auto it = index_.find(key); it != index_.end()) {
    order_.splice(order_.end(), order_, it->second);  // the newest again
    return;
  }
  if (per_host_[host] >= kPerHost) {
    auto oldest = std::find_if(order_.begin(), order_.end(), [&](const Key& k) { return k.first == host; });
    erase_locked(oldest);
  }
  if (order_.size() >= kTotal) erase_locked(order_.begin());
  index_[key] = order_.insert(order_.end(), key);
  ++per_host_[host];
  const std::size_t b = host.size() + dir.size() + 2 * sizeof(Key);
  bytes_ += b;
  if (budget_) budget_->charge(rpc::MemoryBudget::mount, rpc::kShared, b);
}

MountList::~MountList() {
  if (budget_) budget_->release(rpc::MemoryBudget::mount, rpc::kShared, bytes_);
}

void MountList::erase_locked(std::list<Key>::iterator it) {
  const std::size_t b = it->first.size() + it->second.size() + 2 * sizeof(Key);
  bytes_ -= b;
  if (budget_) budget_->release(rpc::MemoryBudget::mount, rpc::kShared, b);
  if (auto h = per_host_.find(it->first); h != per_host_.end() && --h->second == 0) per_host_.erase(h);
  index_.erase(*it);
  order_.erase(it);
}

void MountList::remove(const std::string& host, const std::string& dir) {
  std::lock_guard lk(mu_);
  if (auto it = index_.find({host, dir}); it != index_.end()) erase_locked(it->second);
}

void MountList::remove_host(const std::string& host) {
  std::lock_guard lk(mu_);
  for (auto it = order_.begin(); it != order_.end();) {
    auto next = std::next(it);
    if (it->first == host) erase_locked(it);
    it = next;
  }
}

mount3::MountList MountList::dump(std::size_t max_bytes) {
  mount3::MountList list;
  std::size_t bytes = 4;  // the list's end
  std::lock_guard lk(mu_);
  for (const auto& [host, dir] : order_) {
    // Each entry: TRUE, two strings with their lengths, padded.
    const std::size_t b = 4 + 4 + xdr::pad4(host.size()) + 4 + xdr::pad4(dir.size());
    if (bytes + b > max_bytes || list.entries.size() == mount3::kMaxListEntries) break;
    bytes += b;
    list.entries.push_back({host, dir});
  }
  return list;
}

std::string MountService::canonical(const std::string& path) const {
  auto [ex, rest] = export_of(exports_, path);
  if (!ex) return joined("/", normalised_components(path));
  return joined(ex->entry().path, normalised_components(rest));
}

MNT3res MountService::mnt(const CallContext& ctx, const std::string& path) {
  MNT3res r;
  if (path.empty() || path[0] != '/') {
    r.status = MNT3ERR_NOENT;
    return r;
  }
  auto [ex, rest] = export_of(exports_, path);
  if (!ex) {
    NFSRDMA_LOG_LIMITED(info, "mount: {} asked for {}, which is not exported", ctx.peer.describe(), path);
    r.status = MNT3ERR_NOENT;
    return r;
  }
  const ExportOptions* opts = ex->entry().options_for(ctx.peer.addr);
  if (!opts) {
    NFSRDMA_LOG_LIMITED(info, "mount: refused {} to {}: not in the export's client list", path, ctx.peer.describe());
    r.status = MNT3ERR_ACCES;
    return r;
  }
  if (opts->secure && !ctx.secure) {
    NFSRDMA_LOG_LIMITED(info, "mount: refused {} to {}: insecure source port (export is 'secure')", path, ctx.peer.describe());
    r.status = MNT3ERR_PERM;
    return r;
  }
  if (!become_root()) {
    r.status = MNT3ERR_SERVERFAULT;
    return r;
  }
  Object cur{ex, opts, ObjectFd(dup_fd(ex->root.get()))};
  const std::vector<std::string> comps = normalised_components(rest);
  for (const auto& comp : comps) {
    Fd child;
    if (auto s = lookup_child(cur, comp, child); s != nfs3::NFS3_OK) {
      r.status = to_mountstat(s);
      return r;
    }
    cur.fd = std::move(child);
  }
  struct stat st {};
  if (stat_fd(cur.fd.get(), st) != 0 || !S_ISDIR(st.st_mode)) {
    r.status = MNT3ERR_NOTDIR;
    return r;
  }
  if (auto s = handle_of(exports_, *ex, cur.fd.get(), r.fhandle); s != nfs3::NFS3_OK) {
    r.status = to_mountstat(s);
    return r;
  }
  r.auth_flavors = {static_cast<std::uint32_t>(rpc::AuthFlavor::sys)};
  mounts_.add(host_of(ctx.peer), joined(ex->entry().path, comps));
  NFSRDMA_LOG_LIMITED(info, "mount: {} mounted {}", ctx.peer.describe(), path);
  return r;
}

rpc::AcceptStat MountService::handle(const CallContext& ctx, std::uint32_t proc, xdr::Decoder& in,
                                     xdr::Encoder& out) {
  switch (static_cast<Proc>(proc)) {
    case Proc::NULL_:
      return rpc::AcceptStat::success;
    case Proc::MNT: {
      DirPath p;
      if (!xdr::decode(in, p).ok()) return rpc::AcceptStat::garbage_args;
      MNT3res r = mnt(ctx, p.path);
      codec(out, r);
      return rpc::AcceptStat::success;
    }
    case Proc::DUMP: {
      // Advisory, so a long list is cut to what a reply may hold.
      mount3::MountList list = mounts_.dump(kDumpReplyBytes);
      codec(out, list);
      return rpc::AcceptStat::success;
    }
    case Proc::UMNT: {
      DirPath p;
      if (!xdr::decode(in, p).ok()) return rpc::AcceptStat::garbage_args;
      mounts_.remove(host_of(ctx.peer), canonical(p.path));
      return rpc::AcceptStat::success;
    }
    case Proc::UMNTALL:
      mounts_.remove_host(host_of(ctx.peer));
      return rpc::AcceptStat::success;
    case Proc::EXPORT: {
      Exports list;
      for (const auto& e : exports_.all()) {
        exportnode n{e->entry().path, {}};
        for (const auto& c : e->entry().clients) n.ex_groups.push_back(c.text);
        list.entries.push_back(std::move(n));
      }
      codec(out, list);
      return rpc::AcceptStat::success;
    }
  }
  return rpc::AcceptStat::proc_unavail;
}

}  // namespace nfsrdma::server
