// Who sent a call, as the RPC layer established it.
#pragma once

#include "lib/nfs3/nfs3_types.hpp"
#include "lib/rpc/transport.hpp"
#include "server/identity.hpp"

namespace nfsrdma::server {

struct CallContext {
  const rpc::Peer& peer;
  Credentials caller;      // from AUTH_SYS, before squashing
  bool anonymous = false;  // AUTH_NONE
  bool secure = false;     // see rpc::IncomingCall::secure
  // On a transport's own thread (Dispatcher::handle_inline): a procedure that
  // would have to wait (open a file, read from disk) sets would_block instead
  // and its reply is thrown away, for a worker to run the call again.
  bool may_block = true;
  mutable bool would_block = false;
  // What a call on a transport's thread that is a worker's returns:
  // would_block set, and the status of the reply thrown away.
  nfs3::nfsstat3 pass_on() const {
    would_block = true;
    return nfs3::NFS3ERR_JUKEBOX;
  }
  // Lent by the transport for READ data: registered memory
  // (rpc::IncomingCall::reply_area, or empty), pipes (its `pipes`, or null).
  std::span<std::uint8_t> area;
  PipePool* pipes = nullptr;
};

}  // namespace nfsrdma::server
