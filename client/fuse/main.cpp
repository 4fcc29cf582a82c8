// nfsrdma-fuse: mounts an NFSv3 export over RPC-RDMA (or TCP) with FUSE.
// Command line as mount.fuse3 calls it (`nfsrdma host:/export /mnt -o opts`),
// daemonising only once the mount is up, so every failure is a one-line
// message and a non-zero exit before anything is mounted.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <thread>

#include "client/fuse/filesystem.hpp"
#include "lib/base/heap.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/base/metrics_http.hpp"
#include "lib/fabric/fabric.hpp"

using namespace nfsrdma;

namespace {

constexpr int kMountFailed = 32;  // mount(8)'s "mount failure"

// The parent waits on a pipe until the child reports the mount up (0) or
// failed (its exit status), so `nfsrdma-fuse ... && ls /mnt` just works.
int daemon_pipe = -1;

void detach_or_exit() {
  int fds[2];
  if (::pipe(fds) != 0) return;
  pid_t pid = ::fork();
  if (pid < 0) return;
  if (pid > 0) {
    ::close(fds[1]);
    unsigned char status = kMountFailed;
    if (::read(fds[0], &status, 1) != 1) status = kMountFailed;
    ::_exit(status);
  }
  ::close(fds[0]);
  daemon_pipe = fds[1];
  ::setsid();
}

void report_to_parent(unsigned char status) {
  if (daemon_pipe < 0) return;
  if (status == 0) {
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      if (null > 2) ::close(null);
    }
  }
  [[maybe_unused]] auto w = ::write(daemon_pipe, &status, 1);
  ::close(daemon_pipe);
  daemon_pipe = -1;
}

// FUSE's default readahead is 128 KiB. The kernel NFS client uses 15 × rsize,
// but through FUSE's device 4 × rsize measured best on loopback (1 MiB rsize:
// 1.5 GB/s against 1.15 GB/s at 15 ×; the deeper queue only adds contention).
// Set once the kernel has the mount (statfs waits for FUSE INIT).
void set_readahead(std::string mountpoint, std::uint32_t rsize) {
  std::thread([mountpoint = std::move(mountpoint), rsize] {
    struct statfs sf {};
    struct stat st {};
    if (::statfs(mountpoint.c_str(), &sf) != 0 || ::stat(mountpoint.c_str(), &st) != 0) return;
    std::ofstream ra("/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) +
                     "/read_ahead_kb");
    if (ra) ra << (4ull * rsize / 1024) << '\n';
    if (!ra) spdlog::debug("could not set read_ahead_kb for {}", mountpoint);
  }).detach();
}

// --help's list of mount options, from the table the parser uses; options
// that share a description share a line.
std::string mount_options_help() {
  std::string out = "Mount options:\n";
  auto docs = fuse::mount_option_docs();
  for (std::size_t i = 0; i < docs.size();) {
    std::string names(docs[i].spelling);
    std::size_t j = i + 1;
    for (; j < docs.size() && docs[j].help == docs[i].help; ++j) names += ", " + std::string(docs[j].spelling);
    out += names.size() < 34 ? fmt::format("  {:<34}{}\n", names, docs[i].help)
                             : fmt::format("  {}\n  {:<34}{}\n", names, "", docs[i].help);
    i = j;
  }
  return out + "\nAlso accepted: x-* and comment= (mount(8) and systemd's).";
}

// The atime options libfuse does not pass, set on the mount point as mount(8)
// would. An empty string, or why it could not be done.
std::string set_atime(const std::string& mountpoint, const fuse::MountOptions& o) {
  mount_attr attr{};
  if (o.atime) {
    attr.attr_clr |= MOUNT_ATTR__ATIME;
    attr.attr_set |= *o.atime;
  }
  if (o.nodiratime) (*o.nodiratime ? attr.attr_set : attr.attr_clr) |= MOUNT_ATTR_NODIRATIME;
  if (!attr.attr_set && !attr.attr_clr) return {};
  if (::mount_setattr(AT_FDCWD, mountpoint.c_str(), 0, &attr, sizeof attr) != 0) {
    return std::string("setting the mount point's atime options: ") + std::strerror(errno);
  }
  return {};
}

// What mount.nfs retries: the server not up yet, or not reachable yet. An
// answer (no such export, access denied, a bad option) is final.
// The source of an nfsrdma mount on `dir` (/proc/self/mounts octal-escapes
// spaces and the like in both), or "".
std::string mounted_here(const std::string& dir) {
  auto unescape = [](const std::string& f) {
    std::string out;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (f[i] == '\\' && i + 3 < f.size() && std::isdigit(static_cast<unsigned char>(f[i + 1]))) {
        out += static_cast<char>(std::stoi(f.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        out += f[i];
      }
    }
    return out;
  };
  std::ifstream in("/proc/self/mounts");
  for (std::string src, at, type, rest; in >> src >> at >> type && std::getline(in, rest);) {
    if (unescape(at) == dir && type.starts_with("fuse.nfsrdma")) return unescape(src);
  }
  return "";
}

bool transient(const Error& e) {
  switch (e.code) {
    case ECONNREFUSED: case ETIMEDOUT: case EHOSTUNREACH: case ENETUNREACH: case ECONNRESET: case ENOTCONN:
    case EAGAIN: case EHOSTDOWN: case ENETDOWN:
      return true;
    default:
      return false;
  }
}

// nfs(5)'s fg and bg: keep trying for `retry` minutes; with bg, the first
// failure sends the caller on its way (exit 0) while this process goes on.
Result<std::unique_ptr<fuse::Filesystem>> connect_with_retries(const fuse::MountOptions& options,
                                                               const std::string& source,
                                                               const std::function<int(const std::string&)>& fail) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::minutes(options.retry_minutes());
  auto pause = std::chrono::seconds(1);
  bool backgrounded = false;
  for (;;) {
    auto fs = fuse::Filesystem::connect(options);
    const auto now = std::chrono::steady_clock::now();
    if (fs || !transient(fs.error()) || now >= deadline) {
      if (!fs && backgrounded) spdlog::error("mount {}: {}; giving up", source, fs.error().describe());
      if (!fs && transient(fs.error())) {
        fail(fs.error().describe() + fmt::format("; gave up after {} s (retry={})",
                                                 std::chrono::duration_cast<std::chrono::seconds>(now - start).count(),
                                                 options.retry_minutes()));
      } else if (!fs) {
        fail(fs.error().describe());
      }
      return fs;
    }
    if (options.background && daemon_pipe >= 0) {
      backgrounded = true;
      std::fprintf(stderr, "nfsrdma-fuse: %s: %s; retrying in the background\n", source.c_str(),
                   fs.error().describe().c_str());
      report_to_parent(0);
    }
    // The last try is at the deadline: retry=N means N minutes of trying.
    const auto wait = std::min<std::chrono::steady_clock::duration>(pause, deadline - now);
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - now).count();
    if (!backgrounded && daemon_pipe >= 0) {
      // The caller's terminal, which a daemon's syslog would leave silent.
      std::fprintf(stderr, "nfsrdma-fuse: %s: %s; trying again (for %lld s more)\n", source.c_str(),
                   fs.error().describe().c_str(), static_cast<long long>(left));
    }
    spdlog::warn("mount {}: {}; trying again in {} s ({} s left)", source, fs.error().describe(),
                 std::chrono::duration_cast<std::chrono::seconds>(wait).count(), left);
    std::this_thread::sleep_for(wait);
    pause = std::min(pause * 2, std::chrono::seconds(30));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // ORDER: before fuse_set_signal_handlers, which takes only signals left at SIG_DFL.
  fabric::restore_default_signals();
  CLI::App app{"nfsrdma-fuse: mount an NFSv3 export over RPC-over-RDMA (or TCP) with FUSE"};
  std::string source, mountpoint, log_level = "info";
  std::vector<std::string> opts;
  bool foreground = false, debug = false;
  app.add_option("source", source, "host:/export")->required();
  app.add_option("mountpoint", mountpoint, "Directory to mount on")->required();
  app.add_option("-o", opts, "Mount options, comma separated, as nfs(5) names them (listed below)")
      ->delimiter(',');
  std::string metrics_address;
  app.add_option("--metrics", metrics_address,
                 "Serve Prometheus metrics on HOST:PORT (also -o metrics=HOST:PORT, for fstab)");
  app.add_flag("-f,--foreground", foreground, "Stay in the foreground");
  app.add_flag("-d,--debug", debug, "Foreground, with FUSE and NFS debug logging");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")->capture_default_str();
  app.set_version_flag("-V,--version", "nfsrdma-fuse " NFSRDMA_VERSION);
  app.footer(mount_options_help());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // mount(8): 1 is "incorrect invocation"
  }
  if (debug) {
    foreground = true;
    log_level = "debug";
  }
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "nfsrdma-fuse: mount %s on %s: %s\n", source.c_str(), mountpoint.c_str(), why.c_str());
    report_to_parent(kMountFailed);
    return kMountFailed;
  };
  std::string joined;
  for (auto& o : opts) joined += (joined.empty() ? "" : ",") + o;
  auto options = fuse::parse_mount(source, joined);
  if (!options) return fail(options.error().describe());
  if (!metrics_address.empty()) options->metrics = metrics_address;
  char real[PATH_MAX];
  if (!::realpath(mountpoint.c_str(), real)) return fail(std::string("mount point: ") + std::strerror(errno));
  mountpoint = real;
  options->mountpoint = mountpoint;
  struct stat mst {};
  if (::stat(real, &mst) != 0 || !S_ISDIR(mst.st_mode)) return fail("mount point is not a directory");
  if (auto on = mounted_here(mountpoint); !on.empty()) {
    return fail("already mounted (" + on + " is mounted there; umount it first)");  // as mount.nfs refuses
  }

  // ORDER: fork before any thread exists (the NFS client starts several).
  if (!foreground) detach_or_exit();
  HeapKeeper heap;
  if (!init_logging(log_level, foreground ? "" : "nfsrdma-fuse")) return fail("unknown log level " + log_level);
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<metrics::HttpEndpoint> metrics_http;
  if (!options->metrics.empty()) {
    auto m = metrics::HttpEndpoint::start(options->metrics);
    if (!m) return fail(m.error().describe());
    metrics_http = std::move(*m);
  }
  const std::string transport = options->choose_transport();
  spdlog::info("mount {}: {}", source, transport);
  if (!options->transport_given && options->nfs.proto == client::Proto::tcp && daemon_pipe >= 0) {
    std::fprintf(stderr, "nfsrdma-fuse: %s: %s\n", source.c_str(), transport.c_str());
  }
  auto fs = connect_with_retries(*options, source, fail);
  if (!fs) return kMountFailed;
  const auto& mo = (*fs)->options();
  // Which mount these metrics are (one endpoint per mount): join on it in PromQL.
  metrics::registry()
      .gauge("nfsrdma_client_mount_info", "The mount this process serves: 1, with its mount point, server, export and transport",
             {{"mountpoint", mountpoint}, {"server", mo.nfs.host}, {"export", mo.nfs.export_path},
              {"proto", mo.nfs.proto == client::Proto::rdma ? "rdma" : "tcp"}, {"provider", mo.nfs.provider}})
      .set(1);

  std::string fuse_opts = "fsname=" + source + ",subtype=nfsrdma,max_read=" + std::to_string(mo.rsize);
  // The kernel checks each caller's permissions (the Filesystem class comment says why that is enough).
  fuse_opts += ",default_permissions";
  if (::geteuid() == 0) fuse_opts += ",allow_other";  // a network filesystem is for every user, as with nfs
  if (mo.read_only) fuse_opts += ",ro";
  for (auto& o : mo.fuse_args) {
    if (o != "allow_other" || ::geteuid() != 0) fuse_opts += "," + o;
  }
  std::vector<const char*> fargv = {argv[0], "-o", fuse_opts.c_str()};
  if (debug) fargv.push_back("-d");
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), const_cast<char**>(fargv.data()));
  fuse_session* se = fuse_session_new(&args, &fuse::Filesystem::operations(), sizeof(fuse_lowlevel_ops), fs->get());
  if (!se) return fail("could not start a FUSE session");
  (*fs)->attach(se);
  if (fuse_set_signal_handlers(se) != 0) return fail("could not install signal handlers");
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return fail("the kernel refused the FUSE mount (is /dev/fuse there, and are you root or in fuse's group?)");
  }
  if (auto why = set_atime(mountpoint, mo); !why.empty()) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return fail(why);
  }
  set_readahead(mountpoint, mo.rsize);
  if (!logging_to().empty() && daemon_pipe >= 0) {
    std::fprintf(stderr, "nfsrdma-fuse: no syslog here (/dev/log): logging to %s\n", logging_to().c_str());
  }
  report_to_parent(0);
  if (!foreground) [[maybe_unused]] int r = ::chdir("/");

  // A worker per core, at least 2. Handlers reply from the transport's
  // callbacks (only a flush, fsync or lock waits for the server), so more
  // workers than cores only add wake-ups: with 32 on 2 cores, FUSE 4 KiB
  // random reads at QD32 ran 0.9x and 64 KiB O_DIRECT writes at QD16 0.6x
  // what 2 workers did. A worker, once started, stays: each new one
  // allocates FUSE's 1 MiB request buffer in whichever allocator arena it
  // lands on, and with workers coming and going under load every arena came
  // to keep the most it ever held (measured: the 10-minute soak's client grew
  // 14% with 8 idle workers).
  const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 2u, 32u);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, workers);
  fuse_loop_cfg_set_idle_threads(cfg, workers);
  // The signal that ended the loop (libfuse's handlers: SIGTERM, SIGINT,
  // SIGHUP), 0 for an unmount, or a negative errno from the device.
  const int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  const char* sig = rc > 0 ? sigabbrev_np(rc) : nullptr;
  spdlog::info("unmounting {}{}", mountpoint, sig ? fmt::format(" (SIG{})", sig) : "");
  (*fs)->attach(nullptr);
  // The loop's end cleared the session's exit mark; set again, the replies
  // finish() gives to calls still out, into a closed device, go quietly.
  fuse_session_exit(se);
  fuse_session_unmount(se);
  // ORDER: unmounted, and the default handlers back, before what the
  // write-behind holds goes out: a second SIGTERM then ends the wait.
  fuse_remove_signal_handlers(se);
  const bool all_sent = (*fs)->finish();
  fuse_session_destroy(se);
  fs->reset();
  return rc < 0 || !all_sent ? 1 : 0;
}
