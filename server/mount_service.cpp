#include "server/mount_service.hpp"

#include <arpa/inet.h>

#include "lib/base/log.hpp"

namespace nfsrdma::server {

using namespace mount3;

namespace {

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

}  // namespace

MNT3res MountService::mnt(const CallContext& ctx, const std::string& path) {
  MNT3res r;
  if (path.empty() || path[0] != '/') {
    r.status = MNT3ERR_NOENT;
    return r;
  }
  // The export that is the longest prefix of `path`; the rest is walked inside it.
  const Export* ex = nullptr;
  std::string rest;
  for (const auto& e : exports_.all()) {
    const std::string& p = e->entry().path;
    bool prefix = path.compare(0, p.size(), p) == 0 &&
                  (path.size() == p.size() || path[p.size()] == '/' || p == "/");
    if (prefix && (!ex || p.size() > ex->entry().path.size())) {
      ex = e;
      rest = path.substr(p.size());
    }
  }
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
  Object cur{ex, opts, Fd(::dup(ex->root.get()))};
  std::size_t at = 0;
  while (at < rest.size()) {
    std::size_t next = rest.find('/', at);
    if (next == std::string::npos) next = rest.size();
    std::string comp = rest.substr(at, next - at);
    at = next + 1;
    if (comp.empty() || comp == ".") continue;
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
  {
    std::lock_guard lk(mu_);
    mounts_.insert({host_of(ctx.peer), path});
  }
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
      MountList list;
      {
        std::lock_guard lk(mu_);
        for (const auto& [host, dir] : mounts_) list.entries.push_back({host, dir});
      }
      codec(out, list);
      return rpc::AcceptStat::success;
    }
    case Proc::UMNT: {
      DirPath p;
      if (!xdr::decode(in, p).ok()) return rpc::AcceptStat::garbage_args;
      std::lock_guard lk(mu_);
      mounts_.erase({host_of(ctx.peer), p.path});
      return rpc::AcceptStat::success;
    }
    case Proc::UMNTALL: {
      std::lock_guard lk(mu_);
      std::string host = host_of(ctx.peer);
      std::erase_if(mounts_, [&](const auto& m) { return m.first == host; });
      return rpc::AcceptStat::success;
    }
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
