// The RPC layer of the server: decodes a call header, picks the program by the
// listener it arrived on, checks version and credentials, consults the
// duplicate request cache, runs the procedure and sends the reply.
#pragma once

#include <map>
#include <shared_mutex>

#include <array>

#include "lib/base/metrics.hpp"
#include "lib/rpc/transport.hpp"
#include "server/drc.hpp"
#include "server/mount_service.hpp"
#include "server/nfs_service.hpp"
#include "server/nlm_service.hpp"
#include "server/portmap_service.hpp"

namespace nfsrdma::server {

// kLockListener serves NLM and NSM on one port, told apart by program number.
enum Listener : int { kNfsListener = 1, kMountListener = 2, kPortmapListener = 3, kLockListener = 4 };

class Dispatcher {
 public:
  // `portmap` and `nlm` (with `nsm`) may be null: programs not served.
  Dispatcher(NfsService& nfs, MountService& mount, PortmapService* portmap, DuplicateRequestCache& drc,
             NlmService* nlm = nullptr, StatusMonitor* nsm = nullptr);

  // Runs on a worker thread; always ends in send() or drop() on the channel.
  void handle(rpc::IncomingCall&& call);
  // On a transport's own thread: runs `call` to completion and returns true
  // when it cannot block (NULL; GETATTR and ACCESS of a file or directory
  // kept open (NfsService::held_open); LOOKUP in a directory kept open of a
  // name the kernel has cached, or on an export in memory of any name but a
  // mount point; READ of a file kept open whose data is in the
  // page cache, or in memory (tmpfs); a small WRITE to a file kept open,
  // NfsService::may_write_inline; on an export that is not `sync` or is in
  // memory, a change of names or attributes, not a truncate, whose objects
  // are kept open, NfsService::reach). A WRITE or change can still wait, and is timed.
  // Otherwise returns false with nothing sent and `call` as it was (its
  // duplicate request cache entry given back), for handle() on a worker.
  bool handle_inline(rpc::IncomingCall& call);
  // The most a reply to `call` can take (tcp::TcpServerOptions::reply_bound):
  // exact for NFS, `otherwise` for MOUNT and PORTMAP (an export list has no
  // fixed size) and for anything that does not decode.
  std::size_t reply_bound(std::span<const std::uint8_t> call, std::size_t otherwise) const;

 private:
  NfsService& nfs_;
  MountService& mount_;
  PortmapService* portmap_;
  DuplicateRequestCache& drc_;
  NlmService* nlm_;
  StatusMonitor* nsm_;

  // Per program and procedure, made once: calls, errors (RPC or NFS status)
  // and how long each took from arrival to reply.
  using Series = metrics::CallSeries;
  static constexpr std::uint32_t kProcs = 32;
  static constexpr std::uint32_t kPrograms = 5;  // NFS, MOUNT, PORTMAP, NLM, NSM
  std::array<Series, kPrograms * kProcs + 1> series_{};  // the last for anything else
  Series& series(std::uint32_t prog, std::uint32_t proc);
  bool run(rpc::IncomingCall& call, bool may_block);
  metrics::Counter& drc_hits_;
  // Calls tried inline, by kind (what changes nothing; WRITE; a change of
  // names or attributes) and by whether they ran there: [kind][ran].
  std::array<std::array<metrics::Counter*, 2>, 3> inline_{};
  std::array<metrics::Counter*, 2> transport_calls_{};  // [tcp, rdma]
  // Calls per client address, a series for each of the first
  // kClientSeries addresses seen and "other" for the rest, so no client can
  // make the metrics grow without bound.
  static constexpr std::size_t kClientSeries = 256;
  metrics::Counter& client_calls(const sockaddr_storage& addr);
  metrics::Counter& client_calls_locked(const std::array<std::uint8_t, 16>& key, const sockaddr_storage& addr);
  std::shared_mutex clients_mu_;
  std::map<std::array<std::uint8_t, 16>, metrics::Counter*> client_calls_;  // guarded by clients_mu_
  metrics::Counter* other_client_calls_ = nullptr;
};

}  // namespace nfsrdma::server
