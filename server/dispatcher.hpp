// The RPC layer of the server: decodes a call header, picks the program by the
// listener it arrived on, checks version and credentials, consults the
// duplicate request cache, runs the procedure and sends the reply.
#pragma once

#include "lib/rpc/transport.hpp"
#include "server/drc.hpp"
#include "server/mount_service.hpp"
#include "server/nfs_service.hpp"
#include "server/portmap_service.hpp"

namespace nfsrdma::server {

enum Listener : int { kNfsListener = 1, kMountListener = 2, kPortmapListener = 3 };

class Dispatcher {
 public:
  Dispatcher(NfsService& nfs, MountService& mount, PortmapService* portmap, DuplicateRequestCache& drc)
      : nfs_(nfs), mount_(mount), portmap_(portmap), drc_(drc) {}

  // Runs on a worker thread; always ends in send() or drop() on the channel.
  void handle(rpc::IncomingCall&& call);

 private:
  NfsService& nfs_;
  MountService& mount_;
  PortmapService* portmap_;
  DuplicateRequestCache& drc_;
};

}  // namespace nfsrdma::server
