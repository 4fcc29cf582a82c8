// Synchronous calls over any ClientTransport: builds the RPC header, waits for
// the reply, checks it, and returns the result bytes. For control-plane calls
// (PORTMAP, MOUNT) and tests; the data path uses the asynchronous interface.
#pragma once

#include <vector>

#include "lib/rpc/rpc.hpp"
#include "lib/rpc/transport.hpp"

namespace nfsrdma::rpc {

Result<std::vector<std::uint8_t>> call_sync(ClientTransport& t, std::uint32_t prog, std::uint32_t vers,
                                            std::uint32_t proc, std::span<const std::uint8_t> args,
                                            const std::optional<AuthSys>& cred, int timeout_ms);

}  // namespace nfsrdma::rpc
