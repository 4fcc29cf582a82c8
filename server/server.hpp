// nfsrdma-server assembled: export table, services, dispatcher, worker pool
// and the TCP listeners, with an orderly start and shutdown.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/base/thread_pool.hpp"
#include "lib/transport/rdma/rdma_server.hpp"
#include "lib/transport/tcp/tcp_server.hpp"
#include "server/dispatcher.hpp"

namespace nfsrdma::server {

struct ServerConfig {
  std::vector<ExportEntry> exports;
  std::string bind_address;  // empty: every address
  std::uint16_t nfs_port = 2049;
  std::uint16_t mount_port = 20048;
  bool portmap = false;  // serve PORTMAP ourselves
  std::uint16_t portmap_port = portmap2::kPort;
  bool register_rpcbind = true;
  std::size_t threads = 8;
  unsigned loops = 0;  // event loops (threads loop-N) both transports share; 0: one per core
  rpc::AdmissionLimits admission;  // per transport
  // The memory budget over what clients make the server hold (rpc::MemoryBudget);
  // 0: MemoryBudget::default_limit(), and a quarter of it per client address.
  std::size_t max_memory = 0;
  std::size_t max_memory_per_address = 0;
  NfsLimits limits;
  std::string state_dir = "/var/lib/nfsrdma";
  // Network locks: NLM v4 and NSM v1 on one TCP port (0: any free one),
  // registered like NFS and MOUNT.
  bool nlm = true;
  std::uint16_t nlm_port = 0;
  std::chrono::milliseconds grace{90'000};
  LockLimits lock_limits;
  // RPC-over-RDMA: on by default; a provider named explicitly must work, the
  // default one may be missing (the server then serves TCP only and says so).
  bool rdma = true;
  rdma::RdmaServerOptions rdma_options;
};

class Server {
 public:
  // Opens the exports and binds every port; any failure is a configuration error.
  static Result<std::unique_ptr<Server>> start(const ServerConfig& config);
  ~Server();

  // Serves `exports` from now on, without dropping a connection (SIGHUP);
  // what changed, or why nothing did (ExportTable::replace).
  Result<std::string> reload_exports(std::vector<ExportEntry> exports);

  // Serves until shutdown() is called (from another thread).
  void run();
  // In-flight calls finish and their replies are sent; no new calls are read.
  void shutdown();
  // Any thread: RdmaServer::trace, or a line saying RPC-RDMA is not served.
  std::string rdma_trace(std::size_t per_connection);

 private:
  explicit Server(const ServerConfig& config, const SipKey& key);
  void log_exports() const;

  ServerConfig config_;
  // ORDER: first, so everything charged to it is gone before it.
  std::unique_ptr<rpc::MemoryBudget> budget_;
  ExportTable exports_;
  std::unique_ptr<NfsService> nfs_;
  std::unique_ptr<MountService> mount_;
  std::unique_ptr<PortmapService> portmap_;
  std::unique_ptr<StatusMonitor> nsm_;
  std::unique_ptr<NlmService> nlm_;  // ORDER: after nsm_, which it uses
  DuplicateRequestCache drc_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<ThreadPool<rpc::IncomingCall>> pool_;
  std::vector<std::shared_ptr<EventLoop>> loops_;  // running from start() until run() ends
  std::unique_ptr<tcp::TcpServer> tcp_;
  std::unique_ptr<rdma::RdmaServer> rdma_;
  std::vector<portmap2::mapping> registered_;
};

}  // namespace nfsrdma::server
