// nfsrdma-server: the NFSv3 + MOUNTv3 server. Command line, logging, signals.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <thread>

#include "lib/base/fd.hpp"
#include "lib/base/heap.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics_http.hpp"
#include "lib/fabric/fabric.hpp"
#include "server/server.hpp"

using namespace nfsrdma;

namespace {

// The --exports file's lines, then the --export ones.
Result<std::vector<server::ExportEntry>> read_exports(const std::string& file, const std::vector<std::string>& lines) {
  std::vector<server::ExportEntry> out;
  if (!file.empty()) {
    auto list = server::parse_exports_file(file);
    if (!list) return list.error();
    out = std::move(*list);
  }
  for (const auto& line : lines) {
    auto e = server::parse_export_line(line);
    if (!e) return e.error();
    out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fabric::restore_default_signals();  // before the signal mask below, and a crash's core
  // Connections, the open-file cache's two per file, pipes: before any thread.
  reserve_descriptors(4096);
  CLI::App app{"nfsrdma-server: an NFSv3 + MOUNTv3 server exporting local directories"};
  server::ServerConfig cfg;
  std::vector<std::string> export_lines;
  std::string exports_file, log_level = "info";
  bool verbose = false;
  app.add_option("-e,--export", export_lines,
                 "Export a directory: 'PATH' (everyone, rw) or an exports(5) line, "
                 "e.g. '/srv/pool 10.0.0.0/8(rw,no_root_squash) *(ro)'. Repeatable.");
  app.add_option("--exports", exports_file, "Read exports from an exports(5)-style file");
  app.add_option("--bind", cfg.bind_address, "Address to listen on (default: all)");
  app.add_option("--port", cfg.nfs_port, "NFS TCP port")->capture_default_str();
  app.add_option("--mount-port", cfg.mount_port, "MOUNT TCP port")->capture_default_str();
  bool no_rdma = false;
  app.add_option("--rdma-port", cfg.rdma_options.port, "NFS over RPC-RDMA port")->capture_default_str();
  app.add_option("--provider", cfg.rdma_options.provider,
                 "libfabric provider for RPC-RDMA: tcp, verbs or sockets (default: verbs if present, else tcp)");
  app.add_option("--credits", cfg.rdma_options.credits, "RPC-RDMA credits granted per connection")
      ->capture_default_str()->check(CLI::Range(1u, 1024u));
  double rdma_timeout_s = 10;
  app.add_option("--rdma-timeout", rdma_timeout_s,
                 "Seconds an RDMA Read/Write may wait on a client before its connection is closed")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  double poll_us = 50;
  app.add_option("--poll-us", poll_us,
                 "Microseconds an event loop polls its RPC-RDMA connections after its last activity before it sleeps, "
                 "while the server has at most one call in flight; 0: never poll")
      ->capture_default_str()->check(CLI::Range(0.0, 10000.0));
  app.add_option("--loops", cfg.loops,
                 "Event-loop threads, each serving a share of the TCP and RPC-RDMA connections; 0: one per core")
      ->capture_default_str()->check(CLI::Range(0u, 256u));
  // Before both transports shared the loops, each had its own count.
  for (const char* old : {"--tcp-threads", "--rdma-threads"}) {
    app.add_option_function<unsigned>(old, [old](unsigned) {
         throw CLI::ValidationError(old, "replaced by --loops: both transports share the event loops now");
       })->group("");
  }
  app.add_option("--rdma-send-queue", cfg.rdma_options.send_queue_depth,
                 "Entries of each RPC-RDMA connection's send queue; 0: the provider's (a full queue is a wait)")
      ->capture_default_str()->check(CLI::Range(0, 65536));
  app.add_flag("--no-rdma", no_rdma, "Serve TCP only");
  app.add_flag("--portmap", cfg.portmap, "Serve PORTMAP v2 ourselves (for hosts without rpcbind)");
  app.add_option("--portmap-port", cfg.portmap_port, "Port for --portmap")->capture_default_str();
  bool no_register = false;
  app.add_flag("--no-register", no_register, "Do not register with a running rpcbind");
  app.add_option("--threads", cfg.threads, "Worker threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--max-connections", cfg.admission.max_connections,
                 "Connections held at once, per transport; past it the longest-idle one is closed for a new one")
      ->capture_default_str();
  app.add_option("--max-connections-per-address", cfg.admission.max_per_address,
                 "Connections held at once from one client address, per transport; past it refused")
      ->capture_default_str();
  app.add_option("--max-memory", cfg.max_memory,
                 "Memory all clients together may make the server hold (calls, replies, connections' buffers, "
                 "caches), e.g. 4G; 0: a quarter of the machine's, at least 256M")
      ->capture_default_str()->transform(CLI::AsSizeValue(false));
  app.add_option("--max-memory-per-address", cfg.max_memory_per_address,
                 "The share of --max-memory one client address may hold, e.g. 1G; 0: a quarter of it")
      ->capture_default_str()->transform(CLI::AsSizeValue(false));
  double idle_timeout_s = 360;
  app.add_option("--idle-timeout", idle_timeout_s,
                 "Seconds a connection may stay idle before it is closed (clients reconnect); 0: never")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--rtmax", cfg.limits.rtmax, "Largest READ offered in FSINFO (bytes), up to 4 MiB")
      ->capture_default_str()->check(CLI::Range(4096u, 4u << 20));
  app.add_option("--wtmax", cfg.limits.wtmax, "Largest WRITE offered in FSINFO (bytes), up to 4 MiB")
      ->capture_default_str()->check(CLI::Range(4096u, 4u << 20));
  app.add_option("--state-dir", cfg.state_dir,
                 "Where the file handle key, the NSM state number and the clients holding locks are kept")
      ->capture_default_str();
  bool no_nlm = false;
  app.add_flag("--no-nlm", no_nlm, "Serve no network locks (NLM and NSM); clients must mount with nolock");
  app.add_option("--nlm-port", cfg.nlm_port, "TCP port of NLM and NSM (network locks); 0: any free port")
      ->capture_default_str();
  double grace_s = 90;
  app.add_option("--grace", grace_s,
                 "Seconds after a start in which only reclaimed locks are granted, when clients held locks before it")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  app.add_option("--max-locks-per-client", cfg.lock_limits.ranges_per_address,
                 "Lock ranges one client address may hold (and as many shares); past it NLM4_DENIED_NOLOCKS")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  std::string metrics_address;
  app.add_option("--metrics", metrics_address, "Serve Prometheus metrics on HOST:PORT (GET /metrics)");
  app.add_flag("-v,--verbose", verbose, "Log at debug level");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")->capture_default_str();
  app.set_version_flag("-V,--version", "nfsrdma-server " NFSRDMA_VERSION);
  CLI11_PARSE(app, argc, argv);
  cfg.register_rpcbind = !no_register;
  cfg.rdma = !no_rdma;
  cfg.nlm = !no_nlm;
  cfg.grace = std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
  cfg.rdma_options.rma_timeout = std::chrono::milliseconds(static_cast<long>(rdma_timeout_s * 1000));
  cfg.rdma_options.poll_time = std::chrono::microseconds(static_cast<long>(poll_us));
  cfg.admission.idle_timeout = std::chrono::milliseconds(static_cast<long>(idle_timeout_s * 1000));
  if (verbose) log_level = "debug";
  if (!init_logging(log_level)) {
    std::fprintf(stderr, "nfsrdma-server: unknown log level '%s'\n", log_level.c_str());
    return 2;
  }

  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "nfsrdma-server: %s\n", why.c_str());
    return 1;
  };
  if (exports_file.empty() && export_lines.empty()) return fail("nothing to export: give --export DIR or --exports FILE");
  auto exports = read_exports(exports_file, export_lines);
  if (!exports) return fail(exports.error().describe());
  cfg.exports = std::move(*exports);

  // Modes of new files are exactly what clients ask for; they apply their umask.
  ::umask(0);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // every thread started below inherits it
  HeapKeeper heap;
  ::signal(SIGPIPE, SIG_IGN);

  auto srv = server::Server::start(cfg);
  if (!srv) return fail(srv.error().describe());
  std::unique_ptr<metrics::HttpEndpoint> metrics_http;
  if (!metrics_address.empty()) {
    // /debug/rdma?n=N: each RPC-RDMA connection's last N (64; at most 256)
    // request state changes, for a call that seems to hang.
    metrics::DebugPage rdma_page{"/debug/rdma", [s = srv->get()](const std::map<std::string, std::string>& q) {
      std::size_t n = 64;
      if (auto it = q.find("n"); it != q.end()) {
        const auto& v = it->second;
        if (std::size_t got; std::from_chars(v.data(), v.data() + v.size(), got).ec == std::errc{}) n = got;
      }
      return s->rdma_trace(std::clamp<std::size_t>(n, 1, 256));
    }};
    auto m = metrics::HttpEndpoint::start(metrics_address, {std::move(rdma_page)});
    if (!m) return fail(m.error().describe());
    metrics_http = std::move(*m);
  }
  std::thread waiter([&] {
    for (int sig = -1; sigwait(&signals, &sig) == 0;) {
      if (sig != SIGHUP) {
        spdlog::info("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        return (*srv)->shutdown();
      }
      // Re-read the exports; the running ones stay if the new ones cannot be served.
      auto now = read_exports(exports_file, export_lines);
      auto r = now ? (*srv)->reload_exports(std::move(*now)) : Result<std::string>(now.error());
      if (r) spdlog::info("SIGHUP: exports reloaded: {}", *r);
      else spdlog::error("SIGHUP: exports unchanged: {}", r.error().describe());
    }
  });
  (*srv)->run();
  waiter.join();
  spdlog::info("stopped");
  return 0;
}
