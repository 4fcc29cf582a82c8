#include "lib/rpc/sync_call.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>

namespace nfsrdma::rpc {

Result<std::vector<std::uint8_t>> call_sync(ClientTransport& t, std::uint32_t prog, std::uint32_t vers,
                                            std::uint32_t proc, std::span<const std::uint8_t> args,
                                            const std::optional<AuthSys>& cred, int timeout_ms) {
  // The handler keeps the message: the transport may send it after a timeout here.
  auto msg = std::make_shared<std::vector<std::uint8_t>>();
  xdr::Encoder e(*msg);
  std::uint32_t xid = next_xid();
  encode_call_header(e, xid, prog, vers, proc, cred);
  msg->insert(msg->end(), args.begin(), args.end());

  using Outcome = Result<std::vector<std::uint8_t>>;
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  OutgoingCall call;
  call.xid = xid;
  call.message = xdr::Parts{*msg};
  t.call(call, [promise, xid, msg](Result<xdr::Parts> reply) {
    if (!reply) return promise->set_value(reply.error());
    xdr::Decoder d(*reply);
    if (auto r = check_reply(d, xid); !r) return promise->set_value(r.error());
    promise->set_value(d.unread().joined());
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return Error{ErrorDomain::rpc, ETIMEDOUT, Action::retry_later,
                 "rpc: no reply within " + std::to_string(timeout_ms) + " ms"};
  }
  return future.get();
}

}  // namespace nfsrdma::rpc
