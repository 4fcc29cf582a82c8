// Calls from the server to a client host's RPC programs (NLM GRANTED, the
// _RES answers to _MSG calls, NSM NOTIFY and the monitor's callbacks), found
// through that host's portmapper over TCP, as lockd and statd find them.
// Blocking, with timeouts: run only on the callback threads, never a worker.
#pragma once

#include <string>
#include <vector>

#include "lib/rpc/transport.hpp"

namespace nfsrdma::server {

// The address alone, as text ("10.0.0.1", "fe80::1"), for connecting to it.
std::string address_text(const sockaddr_storage& addr);

// PORTMAP GETPORT at `host`:111 for (prog, vers, TCP), then the call, each
// step bounded by `timeout_ms`. AUTH_NONE, from a reserved port when root.
// The reply's result bytes.
Result<std::vector<std::uint8_t>> call_host(const sockaddr_storage& host, std::uint32_t prog, std::uint32_t vers,
                                 std::uint32_t proc, std::span<const std::uint8_t> args, int timeout_ms);

}  // namespace nfsrdma::server
