#include "lib/rpc/sync_call.hpp"

#include <sys/random.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>

namespace nfsrdma::rpc {

std::uint32_t next_xid() {
  static std::atomic<std::uint32_t> xid = [] {
    std::uint32_t seed = 0;
    if (::getrandom(&seed, sizeof seed, 0) != sizeof seed) {
      seed = static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    return seed;
  }();
  return xid.fetch_add(1);
}

void encode_call_header(xdr::Encoder& e, std::uint32_t xid, std::uint32_t prog, std::uint32_t vers,
                        std::uint32_t proc, const std::optional<AuthSys>& cred) {
  thread_local std::vector<std::uint8_t> body;  // keeps its room: a call allocates nothing here
  body.clear();
  CallHeader h;
  h.xid = xid;
  h.prog = prog;
  h.vers = vers;
  h.proc = proc;
  if (cred) {
    xdr::Encoder be(body);
    encode_auth_sys(be, *cred);
    h.cred = {AuthFlavor::sys, body};
  }
  encode_call(e, h);
}

Result<void> check_reply(xdr::Decoder& d, std::uint32_t xid) {
  auto h = decode_reply(d);
  if (!h) return h.error();
  if (h->xid != xid) return rpc_error("rpc: reply xid does not match the call");
  if (h->stat == ReplyStat::denied) {
    if (h->reject == RejectStat::rpc_mismatch) return rpc_error("rpc: server refused RPC version 2");
    return rpc_error("rpc: server refused the credentials (auth_stat " +
                     std::to_string(static_cast<std::uint32_t>(h->auth)) + ")");
  }
  if (h->accept != AcceptStat::success) {
    std::string s = std::string("rpc: server answered ") + accept_stat_name(h->accept);
    if (h->accept == AcceptStat::prog_mismatch) {
      s += " (supports versions " + std::to_string(h->low) + "-" + std::to_string(h->high) + ")";
    }
    return Error{ErrorDomain::rpc, static_cast<int>(h->accept), Action::fail, s};
  }
  return {};
}

Result<std::vector<std::uint8_t>> call_sync(ClientTransport& t, std::uint32_t prog, std::uint32_t vers,
                                            std::uint32_t proc, std::span<const std::uint8_t> args,
                                            const std::optional<AuthSys>& cred, int timeout_ms) {
  std::vector<std::uint8_t> msg;
  xdr::Encoder e(msg);
  std::uint32_t xid = next_xid();
  encode_call_header(e, xid, prog, vers, proc, cred);
  msg.insert(msg.end(), args.begin(), args.end());

  using Outcome = Result<std::vector<std::uint8_t>>;
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  OutgoingCall call;
  call.xid = xid;
  call.message = msg;
  t.call(call, [promise, xid](Result<std::span<const std::uint8_t>> reply) {
    if (!reply) return promise->set_value(reply.error());
    xdr::Decoder d(*reply);
    if (auto r = check_reply(d, xid); !r) return promise->set_value(r.error());
    auto rest = d.rest();
    promise->set_value(std::vector<std::uint8_t>(rest.begin(), rest.end()));
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return Error{ErrorDomain::rpc, ETIMEDOUT, Action::retry_later,
                 "rpc: no reply within " + std::to_string(timeout_ms) + " ms"};
  }
  return future.get();
}

}  // namespace nfsrdma::rpc
