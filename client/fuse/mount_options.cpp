#include "client/fuse/mount_options.hpp"

#include "lib/fabric/fabric.hpp"

#include <sys/mount.h>

#include <array>
#include <charconv>

namespace nfsrdma::fuse {

namespace {

Error bad(std::string why) { return Error{ErrorDomain::config, EINVAL, Action::fail, std::move(why)}; }

template <class T>
Result<void> number(std::string_view key, std::string_view s, T& out, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) {
    return bad("option " + std::string(key) + " needs a number from " + std::to_string(lo) + " to " +
               std::to_string(hi));
  }
  out = static_cast<T>(v);
  return {};
}

using Apply = Result<void> (*)(MountOptions&, std::string_view value);

struct Option {
  OptionDoc doc;  // spelling "name" takes no value, "name=..." one
  Apply apply;
};

Result<void> ok() { return {}; }
Result<void> addresses(const char* key, std::string_view v, std::vector<std::string>& out) {
  auto a = client::parse_address_list(key, std::string(v));
  if (!a) return a.error();
  out = std::move(*a);
  return {};
}
Result<void> fuse_arg(MountOptions& o, std::string_view name) {
  o.fuse_args.emplace_back(name);
  return {};
}
void locks(MountOptions& o, bool posix, bool flock) {
  o.local_posix_locks = posix;
  o.local_flock_locks = flock;
}

#define NUMBER(name, field, lo, hi) [](MountOptions& o, std::string_view v) { return number(name, v, field, lo, hi); }
#define ADDRESSES(name, field) \
  [](MountOptions& o, std::string_view v) { return addresses(name, v, field); }
#define SET(...) []([[maybe_unused]] MountOptions& o, std::string_view) { __VA_ARGS__; return ok(); }
constexpr std::string_view kVfs = "mount(8)'s meaning: flags of the mount point, kept by the kernel's VFS";
#define VFS(name) {{name, kVfs}, [](MountOptions& o, std::string_view) { return fuse_arg(o, name); }}
#define ATIME(name, mode) {{name, kVfs}, SET(o.atime = mode)}
#define MOUNT8(name) {{name, "mount(8)'s own; nothing for the filesystem to do"}, SET()}

const Option kOptions[] = {
    {{"proto=rdma|tcp", "transport for NFS: RPC-over-RDMA or TCP (default: rdma where an RDMA device is present, else tcp); MOUNT always goes over TCP"},
     [](MountOptions& o, std::string_view v) -> Result<void> {
       if (v == "rdma") o.nfs.proto = client::Proto::rdma;
       else if (v == "tcp") o.nfs.proto = client::Proto::tcp;
       else return bad("proto=" + std::string(v) + ": only rdma and tcp are supported (no UDP)");
       o.transport_given = true;
       return {};
     }},
    {{"rdma", "same as proto=rdma"}, SET(o.nfs.proto = client::Proto::rdma; o.transport_given = true)},
    {{"tcp", "same as proto=tcp"}, SET(o.nfs.proto = client::Proto::tcp; o.transport_given = true)},
    {{"udp", "refused: NFS over UDP is not supported"}, [](MountOptions&, std::string_view) -> Result<void> {
       return bad("udp: NFS over UDP is not supported; use proto=rdma or proto=tcp");
     }},
    {{"port=N", "NFS port; default 20049 over RDMA, over TCP the portmapper's answer or 2049"},
     NUMBER("port", o.nfs.port, 0, 65535)},
    {{"mountport=N", "MOUNT port; default the portmapper's answer, or 20048 where no portmapper answers"}, NUMBER("mountport", o.nfs.mount_port, 0, 65535)},
    {{"mountproto=tcp", "MOUNT over TCP, the only transport it has here"},
     [](MountOptions&, std::string_view v) -> Result<void> {
       if (v == "tcp") return {};
       return bad("mountproto=" + std::string(v) + ": MOUNT is spoken over TCP only");
     }},
    {{"vers=3", "NFS version 3, the only one spoken (also nfsvers=3)"},
     [](MountOptions&, std::string_view v) -> Result<void> {
       if (v == "3") return {};
       return bad("vers=" + std::string(v) + ": only NFS version 3 is spoken (RFC 1813)");
     }},
    {{"nfsvers=3", "same as vers=3"}, [](MountOptions&, std::string_view v) -> Result<void> {
       if (v == "3") return {};
       return bad("nfsvers=" + std::string(v) + ": only NFS version 3 is spoken (RFC 1813)");
     }},
    {{"mountvers=3", "MOUNT version 3, the one NFSv3 uses"}, [](MountOptions&, std::string_view v) -> Result<void> {
       if (v == "3") return {};
       return bad("mountvers=" + std::string(v) + ": only MOUNT version 3 is spoken");
     }},
    {{"sec=sys", "AUTH_SYS credentials, the only flavour spoken"}, [](MountOptions&, std::string_view v) -> Result<void> {
       if (v == "sys") return {};
       return bad("sec=" + std::string(v) + ": only sec=sys is supported (no Kerberos)");
     }},
    {{"rsize=N", "most bytes per READ, 4096 to 4194304 (default 1048576); the server's FSINFO may lower it"},
     NUMBER("rsize", o.rsize, 4096, 4 << 20)},
    {{"wsize=N", "most bytes per WRITE, 4096 to 4194304 (default 1048576); the server's FSINFO may lower it"},
     NUMBER("wsize", o.wsize, 4096, 4 << 20)},
    {{"hard", "retry a call until the server answers (default)"}, SET(o.nfs.hard = true)},
    {{"soft", "fail a call with EIO once it and its retrans retransmissions time out"}, SET(o.nfs.hard = false)},
    {{"timeo=N", "tenths of a second before a call is retransmitted (default 600)"},
     NUMBER("timeo", o.nfs.timeo_ds, 1, 6000)},
    {{"retrans=N", "retransmissions before a soft mount fails a call (default 2)"}, NUMBER("retrans", o.nfs.retrans, 0, 100)},
    {{"ro", "read-only mount"}, SET(o.read_only = true)},
    {{"rw", "read-write mount (default)"}, SET(o.read_only = false)},
    {{"ac", "cache attributes (default)"}, SET(o.noac = false)},
    {{"noac", "no attribute or name caching; writes are synchronous, as with sync"}, SET(o.noac = true)},
    {{"actimeo=N", "sets acregmin, acregmax, acdirmin and acdirmax to N seconds"},
     [](MountOptions& o, std::string_view v) -> Result<void> {
       auto r = number("actimeo", v, o.acregmin_s, 0, 3600);
       o.acregmax_s = o.acdirmin_s = o.acdirmax_s = o.acregmin_s;
       return r;
     }},
    {{"acregmin=N", "least seconds a file's attributes are cached (default 3)"}, NUMBER("acregmin", o.acregmin_s, 0, 3600)},
    {{"acregmax=N", "most seconds a file's attributes are cached (default 60)"}, NUMBER("acregmax", o.acregmax_s, 0, 3600)},
    {{"acdirmin=N", "least seconds a directory's attributes and names are cached (default 30)"},
     NUMBER("acdirmin", o.acdirmin_s, 0, 3600)},
    {{"acdirmax=N", "most seconds a directory's attributes are cached (default 60)"}, NUMBER("acdirmax", o.acdirmax_s, 0, 3600)},
    {{"sync", "each write(2) is on the server's stable storage before it returns"}, SET(o.sync = true)},
    {{"async", "writes are gathered and sent behind the application (default)"}, SET(o.sync = false)},
    {{"cto", "close-to-open: open looks for changes made by other clients (default)"}, SET(o.cto = true)},
    {{"nocto", "open trusts the attribute cache; other clients' changes show once it times out"},
     SET(o.cto = false)},
    {{"rdirplus", "list directories with READDIRPLUS, names with attributes (default)"}, SET(o.rdirplus = true)},
    {{"nordirplus", "list directories with READDIR, names only"}, SET(o.rdirplus = false)},
    {{"lookupcache=all|positive|none", "cache names found and not found (all, default), found only, or none"},
     [](MountOptions& o, std::string_view v) -> Result<void> {
       if (v == "all") o.lookupcache = LookupCache::all;
       else if (v == "positive" || v == "pos") o.lookupcache = LookupCache::positive;
       else if (v == "none") o.lookupcache = LookupCache::none;
       else return bad("lookupcache=" + std::string(v) + ": use all, positive or none");
       return {};
     }},
    {{"lock", "network locks through the server's NLM (default): fcntl and flock locks are seen by every client"},
     SET(locks(o, false, false))},
    {{"nolock", "fcntl and flock locks are kept on this client only, not seen by others"}, SET(locks(o, true, true))},
    {{"local_lock=none|flock|posix|all", "which locks are kept on this client; the others are network locks (NLM)"},
     [](MountOptions& o, std::string_view v) -> Result<void> {
       if (v == "none") locks(o, false, false);
       else if (v == "flock") locks(o, false, true);
       else if (v == "posix") locks(o, true, false);
       else if (v == "all") locks(o, true, true);
       else return bad("local_lock=" + std::string(v) + ": use none, flock, posix or all");
       return {};
     }},
    {{"fg", "try the mount in the foreground for retry minutes (default)"}, SET(o.background = false)},
    {{"bg", "if the first try fails, retry in the background and return at once"}, SET(o.background = true)},
    {{"retry=N", "minutes to keep trying the mount (default 2, or 10000 with bg); 0 tries once"},
     NUMBER("retry", o.retry_min, 0, 10000)},
    {{"resvport", "TCP from a source port below 1024 when root, for secure exports (default)"},
     SET(o.nfs.resvport = true)},
    {{"noresvport", "TCP from any source port"}, SET(o.nfs.resvport = false)},
    {{"intr", "no effect, as on Linux since 2.6.25: a waiting call yields to SIGKILL"}, SET()},
    {{"nointr", "no effect, as on Linux since 2.6.25: a waiting call yields to SIGKILL"}, SET()},
    {{"nconnect=N", "connections to the server, 1 to 16 (default 1); calls are spread over them"}, NUMBER("nconnect", o.nfs.nconnect, 1, 16)},
    {{"remoteaddrs=A~B", "server addresses to spread the connections over (multi-rail; default: the host)"},
     ADDRESSES("remoteaddrs", o.nfs.remote_addrs)},
    {{"localaddrs=A~B", "local addresses (each on its own NIC) to connect from, in turn (multi-rail)"},
     ADDRESSES("localaddrs", o.nfs.local_addrs)},
    {{"provider=NAME", "libfabric provider for RDMA: verbs, tcp or sockets (default: verbs if a verbs device exists, else tcp)"},
     [](MountOptions& o, std::string_view v) -> Result<void> {
       o.nfs.provider = std::string(v);
       o.transport_given = true;  // a provider is for RPC-over-RDMA
       return {};
     }},
    {{"credits=N", "most RPC-over-RDMA calls in flight asked of the server, 1 to 1024 (default 128)"},
     NUMBER("credits", o.nfs.credits, 1, 1024)},
    {{"metrics=HOST:PORT", "serve Prometheus metrics there"}, [](MountOptions& o, std::string_view v) -> Result<void> {
       o.metrics = std::string(v);
       return {};
     }},
    {{"allow_other", "FUSE: others than the mounting user may use it (always on when root mounts)"},
     [](MountOptions& o, std::string_view) { return fuse_arg(o, "allow_other"); }},
    {{"allow_root", "FUSE: root may use a user's mount"},
     [](MountOptions& o, std::string_view) { return fuse_arg(o, "allow_root"); }},
    {{"default_permissions", "FUSE: the kernel checks permissions (always on)"}, SET()},
    VFS("nosuid"), VFS("suid"), VFS("nodev"), VFS("dev"), VFS("noexec"), VFS("exec"), VFS("dirsync"),
    ATIME("noatime", MOUNT_ATTR_NOATIME), ATIME("atime", MOUNT_ATTR_RELATIME), ATIME("relatime", MOUNT_ATTR_RELATIME),
    ATIME("norelatime", MOUNT_ATTR_STRICTATIME), ATIME("strictatime", MOUNT_ATTR_STRICTATIME),
    ATIME("nostrictatime", MOUNT_ATTR_RELATIME),
    {{"nodiratime", kVfs}, SET(o.nodiratime = true)}, {{"diratime", kVfs}, SET(o.nodiratime = false)},
    MOUNT8("defaults"), MOUNT8("auto"), MOUNT8("noauto"), MOUNT8("_netdev"), MOUNT8("nofail"), MOUNT8("user"),
    MOUNT8("users"), MOUNT8("nouser"), MOUNT8("owner"), MOUNT8("group"),
};

#undef NUMBER
#undef ADDRESSES
#undef SET
#undef VFS
#undef ATIME
#undef MOUNT8

const std::array<OptionDoc, std::size(kOptions)> kDocs = [] {
  std::array<OptionDoc, std::size(kOptions)> d{};
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = kOptions[i].doc;
  return d;
}();

const Option* find(std::string_view key, bool has_value) {
  for (const auto& opt : kOptions) {
    auto eq = opt.doc.spelling.find('=');
    if (opt.doc.spelling.substr(0, eq) == key && (eq != std::string_view::npos) == has_value) return &opt;
  }
  return nullptr;
}

}  // namespace

std::span<const OptionDoc> mount_option_docs() { return kDocs; }

Result<MountOptions> parse_mount(std::string_view source, std::string_view options, MountOptions o) {
  if (auto r = client::parse_source(source, o.nfs); !r) return bad("source " + r.error().message);

  while (!options.empty()) {
    auto comma = options.find(',');
    std::string_view item = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view{} : options.substr(comma + 1);
    // x-* (x-systemd.automount...) and comment= belong to mount(8) and systemd.
    if (item.empty() || item.starts_with("x-") || item.starts_with("comment=")) continue;
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    bool has_value = eq != std::string_view::npos;
    const Option* opt = find(key, has_value);
    if (!opt) {
      if (find(key, !has_value)) {
        return bad("option " + std::string(key) + (has_value ? " takes no value" : " needs a value"));
      }
      return bad("unknown mount option '" + std::string(item) + "'");
    }
    if (auto r = opt->apply(o, has_value ? item.substr(eq + 1) : std::string_view{}); !r) return r.error();
  }
  if (o.acregmax_s < o.acregmin_s) o.acregmax_s = o.acregmin_s;
  if (o.acdirmax_s < o.acdirmin_s) o.acdirmax_s = o.acdirmin_s;
  return o;
}

std::string MountOptions::choose_transport() {
  if (transport_given && nfs.proto == client::Proto::tcp) return "NFS over TCP (proto=tcp)";
  // An unknown provider name is left for the connection to report.
  auto chosen = fabric::choose_provider(nfs.provider);
  const std::string provider = chosen ? *chosen : nfs.provider;
  if (transport_given) {
    const char* why = !nfs.provider.empty() ? "provider= given"
                      : provider == "verbs" ? "an RDMA device is present"
                                            : "no RDMA device: proto=rdma carries it over TCP";
    nfs.provider = provider;
    return "RPC-over-RDMA on libfabric's " + provider + " provider (" + why + ")";
  }
  if (provider == "verbs") {
    nfs.proto = client::Proto::rdma;
    nfs.provider = provider;
    return "RPC-over-RDMA on libfabric's verbs provider (the default where an RDMA device is present)";
  }
  nfs.proto = client::Proto::tcp;
  return "NFS over TCP (no RDMA device here; proto=rdma would carry RPC-over-RDMA over libfabric's tcp provider, "
         "which is slower than TCP)";
}

std::string describe(const MountOptions& o) {
  std::string s = o.read_only ? "ro" : "rw";
  s += o.writes_sync() ? ",sync" : "";
  s += ",vers=3";
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
  if (!o.cto) s += ",nocto";
  if (!o.rdirplus) s += ",nordirplus";
  if (o.lookupcache != LookupCache::all) s += o.lookupcache == LookupCache::none ? ",lookupcache=none" : ",lookupcache=pos";
  static constexpr const char* kLocal[] = {"none", "flock", "posix", "all"};
  s += std::string(",local_lock=") + kLocal[(o.local_posix_locks ? 2 : 0) + (o.local_flock_locks ? 1 : 0)];
  s += o.nfs.resvport ? "" : ",noresvport";
  if (o.nfs.nconnect > 1) s += ",nconnect=" + std::to_string(o.nfs.nconnect);
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& a : v) out += (out.empty() ? "" : "~") + a;
    return out;
  };
  if (!o.nfs.remote_addrs.empty()) s += ",remoteaddrs=" + list(o.nfs.remote_addrs);
  if (!o.nfs.local_addrs.empty()) s += ",localaddrs=" + list(o.nfs.local_addrs);
  return s;
}

}  // namespace nfsrdma::fuse
