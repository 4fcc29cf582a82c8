#include "server/server.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>

#include "lib/base/log.hpp"
#include "lib/nfs3/nsm1.hpp"

namespace nfsrdma::server {

Server::Server(const ServerConfig& config, const SipKey& key) : config_(config), exports_(key) {
  const std::size_t limit = config.max_memory ? config.max_memory : rpc::MemoryBudget::default_limit();
  budget_ = std::make_unique<rpc::MemoryBudget>(
      limit, config.max_memory_per_address ? config.max_memory_per_address : limit / 4);
  drc_.charge_to(budget_.get());
}

// After shutdown(), or when start() failed half way: shutdown()'s order.
// ORDER: the pool before the TCP connections' end: a call a loop handed out
// as intake stopped may still wait in it, and runs now, while its
// connection and channel exist. The loops end before the transports go.
Server::~Server() {
  if (tcp_) tcp_->stop_intake();
  if (rdma_) rdma_->stop();
  pool_.reset();
  if (tcp_) tcp_->stop();
  for (auto& l : loops_) l->stop();
  for (auto& l : loops_) l->join();
}

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config) {
  auto key = load_or_create_key(config.state_dir);
  if (!key) return key.error();
  std::unique_ptr<Server> s(new Server(config, *key));
  if (auto r = s->exports_.replace(config.exports); !r) return r.error();
  nfs3::verf8 verf{};
  // A new write verifier on every start tells clients to resend uncommitted data.
  if (::getrandom(verf.data(), verf.size(), 0) != static_cast<ssize_t>(verf.size())) {
    return sys_error(errno, "getrandom");
  }
  s->nfs_ = std::make_unique<NfsService>(s->exports_, config.limits, verf);
  s->mount_ = std::make_unique<MountService>(s->exports_);
  s->mount_->mounts().charge_to(s->budget_.get());
  if (config.portmap) s->portmap_ = std::make_unique<PortmapService>();
  if (config.nlm) {
    auto nsm = StatusMonitor::open(config.state_dir);
    if (!nsm) return nsm.error();
    s->nsm_ = std::move(*nsm);
    std::string name = config.bind_address;
    if (name.empty()) {
      char host[256] = "";
      ::gethostname(host, sizeof host - 1);
      name = host;
    }
    s->nlm_ = std::make_unique<NlmService>(s->exports_, *s->nsm_, config.lock_limits, config.grace, name);
  }
  s->dispatcher_ = std::make_unique<Dispatcher>(*s->nfs_, *s->mount_, s->portmap_.get(), s->drc_, s->nlm_.get(),
                                                s->nsm_.get());
  Dispatcher* d = s->dispatcher_.get();
  s->pool_ = std::make_unique<ThreadPool<rpc::IncomingCall>>(config.threads,
                                                              [d](rpc::IncomingCall&& call) { d->handle(std::move(call)); });

  // Both transports' connections share these loops, one per core.
  s->loops_ = EventLoop::make(config.loops, "loop");
  for (auto& loop : s->loops_) loop->start();

  tcp::TcpServerOptions topts;
  topts.admission = config.admission;
  topts.event_loops = s->loops_;
  topts.budget = s->budget_.get();
  topts.max_record_bytes = std::max(config.limits.rtmax, config.limits.wtmax) + 64 * 1024;
  topts.reply_bound = [d, max = topts.max_record_bytes](std::span<const std::uint8_t> call) {
    return d->reply_bound(call, max);
  };
  // Over both transports, calls that cannot block run to completion on the
  // thread that received them (the connection's event loop), without the hand-off to a worker and back; the rest go to the
  // workers.
  auto dispatch = [d, pool = s->pool_.get()](rpc::IncomingCall&& call) {
    if (d->handle_inline(call)) return;
    pool->post(std::move(call));
  };
  s->tcp_ = std::make_unique<tcp::TcpServer>(topts, dispatch);
  // ORDER: the NFS TCP listener comes last of the fixed ports, so that once
  // its port accepts, MOUNT, PORTMAP and RPC-RDMA are up too (clients and
  // tests rely on it).
  auto mount_port = s->tcp_->add_listener(config.bind_address, config.mount_port, kMountListener);
  if (!mount_port) return mount_port.error();
  std::optional<std::uint16_t> pm_port;
  if (config.portmap) {
    auto p = s->tcp_->add_listener(config.bind_address, config.portmap_port, kPortmapListener);
    if (!p) return p.error();
    pm_port = *p;
  }
  // ORDER: NLM on any free port (the default) is bound after every fixed
  // port, NFS's included, so it never takes one the configuration names;
  // nothing is served before run(), and clients find NLM through the
  // portmapper. A fixed NLM port is bound with the other fixed ones.
  std::optional<std::uint16_t> lock_port;
  auto bind_nlm = [&]() -> Result<void> {
    auto p = s->tcp_->add_listener(config.bind_address, config.nlm_port, kLockListener);
    if (!p) return p.error();
    lock_port = *p;
    return {};
  };
  if (config.nlm && config.nlm_port != 0) {
    if (auto p = bind_nlm(); !p) return p.error();
  }
  if (config.rdma) {
    rdma::RdmaServerOptions ro = config.rdma_options;
    if (ro.host.empty()) ro.host = config.bind_address;
    ro.admission = config.admission;
    ro.budget = s->budget_.get();
    ro.event_loops = s->loops_;
    // Larger transfers take fewer payload buffers of the same bytes in all
    // (16 of 4 MiB where 64 of 1 MiB), so --rtmax 4M does not pin four times
    // the memory; smaller ones keep the count.
    const std::size_t default_bytes = ro.payload_bytes;
    ro.payload_bytes = std::max(config.limits.rtmax, config.limits.wtmax) + 64 * 1024;
    if (ro.payload_bytes > default_bytes) {
      ro.payload_slots = std::max<std::size_t>(16, ro.payload_slots * default_bytes / ro.payload_bytes);
    }
    auto r = rdma::RdmaServer::start(ro, dispatch);
    if (r) {
      s->rdma_ = std::move(*r);
    } else if (!config.rdma_options.provider.empty()) {
      return r.error();
    } else {
      spdlog::warn("RPC-over-RDMA not available ({}); serving TCP only", r.error().describe());
    }
  }
  auto nfs_port = s->tcp_->add_listener(config.bind_address, config.nfs_port, kNfsListener);
  if (!nfs_port) return nfs_port.error();
  if (config.nlm && config.nlm_port == 0) {
    if (auto p = bind_nlm(); !p) return p.error();
  }
  std::vector<portmap2::mapping> maps = {
      {nfs3::kProgram, nfs3::kVersion, portmap2::IPPROTO_TCP_, *nfs_port},
      {mount3::kProgram, mount3::kVersion, portmap2::IPPROTO_TCP_, *mount_port},
  };
  if (lock_port) {
    maps.push_back({nlm4::kProgram, nlm4::kVersion, portmap2::IPPROTO_TCP_, *lock_port});
    maps.push_back({nsm1::kProgram, nsm1::kVersion, portmap2::IPPROTO_TCP_, *lock_port});
  }
  if (pm_port) {
    // Nothing is served before run(), so the map is complete before any GETPORT.
    s->portmap_->add({portmap2::kProgram, portmap2::kVersion, portmap2::IPPROTO_TCP_, *pm_port});
    for (const auto& m : maps) s->portmap_->add(m);
    spdlog::info("portmap: serving on port {}", *pm_port);
  } else if (config.register_rpcbind && register_with_rpcbind(maps, true)) {
    s->registered_ = maps;
  }
  s->log_exports();
  spdlog::info("memory budget: {} MiB for what clients make the server hold, {} MiB of it per client address",
               s->budget_->limit() >> 20, s->budget_->per_address() >> 20);
  if (s->rdma_) {
    spdlog::info("listening: NFSv3 over RPC-RDMA on port {} (libfabric provider {}, {} credits)", s->rdma_->port(),
                 s->rdma_->provider(), config.rdma_options.credits);
  }
  if (lock_port) {
    spdlog::info("listening: NLMv4 and NSMv1 (network locks) on tcp port {}, NSM state {}", *lock_port,
                 s->nsm_->state());
    s->nlm_->notify_restart();
  }
  spdlog::info("listening: NFSv3 on tcp port {}, MOUNTv3 on tcp port {}, {} worker threads", *nfs_port, *mount_port,
               config.threads);
  return s;
}

Result<std::string> Server::reload_exports(std::vector<ExportEntry> exports) {
  auto r = exports_.replace(std::move(exports));
  if (r) log_exports();
  return r;
}

void Server::log_exports() const {
  if (exports_.all().empty()) spdlog::warn("nothing exported yet: list exports in the --exports file and send SIGHUP");
  for (const auto* ex : exports_.all()) {
    const ExportEntry& e = ex->entry();
    for (const auto& w : e.warnings) spdlog::warn("{}", w);
    spdlog::info("exporting {} (fsid {:#x}) to {} client entr{}", e.path, ex->id, e.clients.size(),
                 e.clients.size() == 1 ? "y" : "ies");
    for (const auto& c : e.clients) {
      const std::string nets = describe_networks(c);
      spdlog::info("  {}({}){}", c.text, describe(c.options), nets == c.text ? "" : " = " + nets);
    }
  }
}

void Server::run() {
  tcp_->serve();
  for (auto& l : loops_) l->join();
}

void Server::shutdown() {
  spdlog::info("shutting down: finishing calls in flight");
  tcp_->stop_intake();
  if (rdma_) rdma_->stop();
  pool_->drain();
  tcp_->stop();
  for (auto& l : loops_) l->stop();  // each ends once both transports' parts are finished
  if (!registered_.empty()) register_with_rpcbind(registered_, false);
}

std::string Server::rdma_trace(std::size_t per_connection) {
  return rdma_ ? rdma_->trace(per_connection) : std::string("# RPC-RDMA is not served (--no-rdma, or no provider)\n");
}

}  // namespace nfsrdma::server
