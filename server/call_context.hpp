// Who sent a call, as the RPC layer established it.
#pragma once

#include "lib/rpc/transport.hpp"
#include "server/identity.hpp"

namespace nfsrdma::server {

struct CallContext {
  const rpc::Peer& peer;
  Credentials caller;      // from AUTH_SYS, before squashing
  bool anonymous = false;  // AUTH_NONE
  bool secure = false;     // see rpc::IncomingCall::secure
};

}  // namespace nfsrdma::server
