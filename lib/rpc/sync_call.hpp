// Synchronous calls over any ClientTransport: builds the RPC header, waits for
// the reply, checks it, and returns the result bytes. For control-plane calls
// (PORTMAP, MOUNT) and tests; the data path uses the asynchronous interface.
#pragma once

#include <optional>
#include <vector>

#include "lib/rpc/rpc.hpp"
#include "lib/rpc/transport.hpp"

namespace nfsrdma::rpc {

// A fresh xid: random start per process, then sequential.
std::uint32_t next_xid();

// Encodes a call header with AUTH_SYS credentials when given, else AUTH_NONE.
void encode_call_header(xdr::Encoder& e, std::uint32_t xid, std::uint32_t prog, std::uint32_t vers,
                        std::uint32_t proc, const std::optional<AuthSys>& cred);

// Checks a reply header: an error unless it is MSG_ACCEPTED/SUCCESS. On success
// `d` is positioned at the results.
Result<void> check_reply(xdr::Decoder& d, std::uint32_t xid);

Result<std::vector<std::uint8_t>> call_sync(ClientTransport& t, std::uint32_t prog, std::uint32_t vers,
                                            std::uint32_t proc, std::span<const std::uint8_t> args,
                                            const std::optional<AuthSys>& cred, int timeout_ms);

}  // namespace nfsrdma::rpc
