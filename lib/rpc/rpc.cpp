// RFC 5531 message headers. Bounded like every decoder here: auth bodies are
// capped at 400 bytes and AUTH_SYS at 16 groups before anything is read.
#include "lib/rpc/rpc.hpp"

#include <sys/random.h>

#include <atomic>
#include <chrono>

namespace nfsrdma::rpc {

Error rpc_error(std::string what) {
  return Error{ErrorDomain::rpc, 0, Action::fail, std::move(what)};
}

void codec(xdr::Decoder& x, OpaqueAuth& a) {
  x.enumeration(a.flavor);
  x.opaque_view(a.body, kMaxAuthBytes);
}

void codec(xdr::Encoder& x, OpaqueAuth& a) {
  x.enumeration(a.flavor);
  x.opaque_view(a.body, kMaxAuthBytes);
}

Result<CallHeader> decode_call(xdr::Decoder& d) {
  CallHeader h;
  MsgType type{};
  d.u32(h.xid);
  d.enumeration(type);
  if (d.ok() && type != MsgType::call) return rpc_error("rpc: message is not a CALL");
  d.u32(h.rpcvers);
  d.u32(h.prog);
  d.u32(h.vers);
  d.u32(h.proc);
  codec(d, h.cred);
  codec(d, h.verf);
  if (auto r = d.result(); !r) return r.error();
  return h;
}

void encode_call(xdr::Encoder& e, const CallHeader& h) {
  e.u32(h.xid);
  e.enumeration(MsgType::call);
  e.u32(h.rpcvers);
  e.u32(h.prog);
  e.u32(h.vers);
  e.u32(h.proc);
  OpaqueAuth cred = h.cred, verf = h.verf;
  codec(e, cred);
  codec(e, verf);
}

Result<ReplyHeader> decode_reply(xdr::Decoder& d) {
  ReplyHeader h;
  MsgType type{};
  d.u32(h.xid);
  d.enumeration(type);
  if (d.ok() && type != MsgType::reply) return rpc_error("rpc: message is not a REPLY");
  d.enumeration(h.stat);
  if (d.ok() && h.stat == ReplyStat::accepted) {
    codec(d, h.verf);
    d.enumeration(h.accept);
    if (d.ok() && h.accept == AcceptStat::prog_mismatch) {
      d.u32(h.low);
      d.u32(h.high);
    } else if (d.ok() && static_cast<std::uint32_t>(h.accept) > 5) {
      d.fail(xdr::Fault::bad_value);
    }
  } else if (d.ok() && h.stat == ReplyStat::denied) {
    d.enumeration(h.reject);
    if (d.ok() && h.reject == RejectStat::rpc_mismatch) {
      d.u32(h.low);
      d.u32(h.high);
    } else if (d.ok() && h.reject == RejectStat::auth_error) {
      d.enumeration(h.auth);
    } else if (d.ok()) {
      d.fail(xdr::Fault::bad_value);
    }
  } else if (d.ok()) {
    d.fail(xdr::Fault::bad_value);
  }
  if (auto r = d.result(); !r) return r.error();
  return h;
}

void encode_accepted(xdr::Encoder& e, std::uint32_t xid, AcceptStat stat, std::uint32_t low,
                     std::uint32_t high) {
  e.u32(xid);
  e.enumeration(MsgType::reply);
  e.enumeration(ReplyStat::accepted);
  OpaqueAuth none;
  codec(e, none);
  e.enumeration(stat);
  if (stat == AcceptStat::prog_mismatch) {
    e.u32(low);
    e.u32(high);
  }
}

void encode_rpc_mismatch(xdr::Encoder& e, std::uint32_t xid) {
  e.u32(xid);
  e.enumeration(MsgType::reply);
  e.enumeration(ReplyStat::denied);
  e.enumeration(RejectStat::rpc_mismatch);
  e.u32(kRpcVersion);
  e.u32(kRpcVersion);
}

void encode_auth_error(xdr::Encoder& e, std::uint32_t xid, AuthStat why) {
  e.u32(xid);
  e.enumeration(MsgType::reply);
  e.enumeration(ReplyStat::denied);
  e.enumeration(RejectStat::auth_error);
  e.enumeration(why);
}

Result<AuthSys> decode_auth_sys(std::span<const std::uint8_t> body) {
  xdr::Decoder d(body);
  AuthSys a;
  d.u32(a.stamp);
  std::span<const std::uint8_t> name;
  d.opaque_view(name, kMaxMachineName);
  a.machinename = {reinterpret_cast<const char*>(name.data()), name.size()};
  d.u32(a.uid);
  d.u32(a.gid);
  a.ngids = d.count(0, kMaxAuthSysGroups, 4);
  for (std::uint32_t i = 0; i < a.ngids; ++i) d.u32(a.gids[i]);
  if (auto r = d.result(); !r) return r.error();
  return a;
}

void encode_auth_sys(xdr::Encoder& e, const AuthSys& a) {
  e.u32(a.stamp);
  e.opaque_view({reinterpret_cast<const std::uint8_t*>(a.machinename.data()), a.machinename.size()},
                kMaxMachineName);
  e.u32(a.uid);
  e.u32(a.gid);
  e.count(a.ngids, kMaxAuthSysGroups, 4);
  for (std::uint32_t i = 0; i < a.ngids; ++i) e.u32(a.gids[i]);
}

bool peek_xid(std::span<const std::uint8_t> msg, std::uint32_t& xid) {
  xdr::Decoder d(msg);
  d.u32(xid);
  return d.ok();
}

const char* accept_stat_name(AcceptStat s) {
  switch (s) {
    case AcceptStat::success: return "SUCCESS";
    case AcceptStat::prog_unavail: return "PROG_UNAVAIL";
    case AcceptStat::prog_mismatch: return "PROG_MISMATCH";
    case AcceptStat::proc_unavail: return "PROC_UNAVAIL";
    case AcceptStat::garbage_args: return "GARBAGE_ARGS";
    case AcceptStat::system_err: return "SYSTEM_ERR";
  }
  return "?";
}

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

}  // namespace nfsrdma::rpc
