#include "client/fuse/mount_options.hpp"

#include <charconv>
#include <set>

namespace nfsrdma::fuse {

namespace {

Error bad(std::string why) { return Error{ErrorDomain::config, EINVAL, Action::fail, std::move(why)}; }

template <class T>
bool number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Options mount(8) and mount.fuse3 add or that mean nothing to a network
// filesystem served from user space; accepted so fstab lines work unchanged.
const std::set<std::string_view> kIgnored = {
    "defaults", "_netdev", "nofail", "auto", "noauto", "user", "users", "nouser", "owner", "dev", "nodev",
    "suid", "nosuid", "exec", "noexec", "async", "atime", "noatime", "relatime", "norelatime", "strictatime",
    "nodiratime", "diratime", "lazytime", "nolazytime", "vers=3", "nfsvers=3", "intr", "nointr", "nolock",
    "local_lock=none", "sec=sys", "bg", "fg", "x-systemd.automount", "lookupcache=all"};
// Passed to the kernel through libfuse.
const std::set<std::string_view> kFuse = {"allow_other", "allow_root", "default_permissions"};

}  // namespace

Result<MountOptions> parse_mount(std::string_view source, std::string_view options, MountOptions o) {
  // host:/export, with [addr] for IPv6.
  std::size_t colon;
  if (!source.empty() && source.front() == '[') {
    auto close = source.find(']');
    if (close == std::string_view::npos || close + 1 >= source.size() || source[close + 1] != ':') {
      return bad("source '" + std::string(source) + "' is not [address]:/export");
    }
    o.nfs.host = std::string(source.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = source.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return bad("source '" + std::string(source) + "' is not host:/export");
    }
    o.nfs.host = std::string(source.substr(0, colon));
  }
  o.nfs.export_path = std::string(source.substr(colon + 1));
  if (o.nfs.export_path.empty() || o.nfs.export_path.front() != '/') {
    return bad("export path in '" + std::string(source) + "' must start with /");
  }

  while (!options.empty()) {
    auto comma = options.find(',');
    std::string_view item = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view{} : options.substr(comma + 1);
    if (item.empty() || kIgnored.count(item)) continue;
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view val = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
    bool has_val = eq != std::string_view::npos;
    auto need_number = [&](auto& out, auto lo, auto hi) -> Result<void> {
      std::int64_t v = 0;
      if (!has_val || !number(val, v) || v < lo || v > hi) {
        return bad("option " + std::string(key) + " needs a number from " + std::to_string(lo) + " to " +
                   std::to_string(hi));
      }
      out = static_cast<std::remove_reference_t<decltype(out)>>(v);
      return {};
    };
    Result<void> r;
    if (key == "proto" && has_val) {
      if (val == "rdma") o.nfs.proto = client::Proto::rdma;
      else if (val == "tcp") o.nfs.proto = client::Proto::tcp;
      else return bad("proto=" + std::string(val) + ": only rdma and tcp are supported");
    } else if (key == "rdma" && !has_val) {
      o.nfs.proto = client::Proto::rdma;
    } else if (key == "metrics" && has_val) {
      o.metrics = std::string(val);
    } else if (key == "provider" && has_val) {
      o.nfs.provider = std::string(val);
    } else if (key == "port") {
      r = need_number(o.nfs.port, 0, 65535);
    } else if (key == "mountport") {
      r = need_number(o.nfs.mount_port, 0, 65535);
    } else if (key == "rsize") {
      r = need_number(o.rsize, 4096, 1 << 20);
    } else if (key == "wsize") {
      r = need_number(o.wsize, 4096, 1 << 20);
    } else if (key == "timeo") {
      r = need_number(o.nfs.timeo_ds, 1, 6000);
    } else if (key == "retrans") {
      r = need_number(o.nfs.retrans, 0, 100);
    } else if (key == "nconnect") {
      r = need_number(o.nfs.nconnect, 1, 16);
    } else if (key == "credits") {
      r = need_number(o.nfs.credits, 1, 1024);
    } else if (key == "hard" && !has_val) {
      o.nfs.hard = true;
    } else if (key == "soft" && !has_val) {
      o.nfs.hard = false;
    } else if (key == "ro" && !has_val) {
      o.read_only = true;
    } else if (key == "rw" && !has_val) {
      o.read_only = false;
    } else if (key == "noac" && !has_val) {
      o.noac = true;
    } else if (key == "ac" && !has_val) {
      o.noac = false;
    } else if (key == "actimeo") {
      r = need_number(o.acregmin_s, 0, 3600);
      o.acregmax_s = o.acdirmin_s = o.acdirmax_s = o.acregmin_s;
    } else if (key == "acregmin") {
      r = need_number(o.acregmin_s, 0, 3600);
    } else if (key == "acregmax") {
      r = need_number(o.acregmax_s, 0, 3600);
    } else if (key == "acdirmin") {
      r = need_number(o.acdirmin_s, 0, 3600);
    } else if (key == "acdirmax") {
      r = need_number(o.acdirmax_s, 0, 3600);
    } else if (!has_val && kFuse.count(key)) {
      o.fuse_args.emplace_back(key);
    } else {
      return bad("unknown mount option '" + std::string(item) + "'");
    }
    if (!r) return r.error();
  }
  if (o.acregmax_s < o.acregmin_s) o.acregmax_s = o.acregmin_s;
  if (o.acdirmax_s < o.acdirmin_s) o.acdirmax_s = o.acdirmin_s;
  return o;
}

std::string describe(const MountOptions& o) {
  std::string s = o.read_only ? "ro" : "rw";
  s += o.nfs.proto == client::Proto::rdma ? ",proto=rdma" : ",proto=tcp";
  if (!o.nfs.provider.empty()) s += ",provider=" + o.nfs.provider;
  s += ",rsize=" + std::to_string(o.rsize) + ",wsize=" + std::to_string(o.wsize);
  s += o.nfs.hard ? ",hard" : ",soft";
  s += ",timeo=" + std::to_string(o.nfs.timeo_ds) + ",retrans=" + std::to_string(o.nfs.retrans);
  if (o.noac) {
    s += ",noac";
  } else {
    s += ",acregmin=" + std::to_string(o.acregmin_s) + ",acregmax=" + std::to_string(o.acregmax_s) +
         ",acdirmin=" + std::to_string(o.acdirmin_s) + ",acdirmax=" + std::to_string(o.acdirmax_s);
  }
  if (o.nfs.nconnect > 1) s += ",nconnect=" + std::to_string(o.nfs.nconnect);
  return s;
}

}  // namespace nfsrdma::fuse
