// ONC RPC version 2 (RFC 5531): call and reply headers, opaque_auth, AUTH_SYS.
// Decoded headers borrow the message buffer (cred/verf bodies, machine name):
// use them only while that buffer lives.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpc {

constexpr std::uint32_t kRpcVersion = 2;
constexpr std::uint32_t kMaxAuthBytes = 400;      // RFC 5531 §8.2
constexpr std::uint32_t kMaxMachineName = 255;    // RFC 5531 Appendix A
constexpr std::uint32_t kMaxAuthSysGroups = 16;

enum class MsgType : std::uint32_t { call = 0, reply = 1 };
enum class AuthFlavor : std::uint32_t { none = 0, sys = 1, short_hand = 2, dh = 3, gss = 6 };
enum class ReplyStat : std::uint32_t { accepted = 0, denied = 1 };
enum class AcceptStat : std::uint32_t {
  success = 0, prog_unavail = 1, prog_mismatch = 2, proc_unavail = 3, garbage_args = 4, system_err = 5,
};
enum class RejectStat : std::uint32_t { rpc_mismatch = 0, auth_error = 1 };
enum class AuthStat : std::uint32_t {
  ok = 0, badcred = 1, rejectedcred = 2, badverf = 3, rejectedverf = 4, tooweak = 5,
};

struct OpaqueAuth {
  AuthFlavor flavor = AuthFlavor::none;
  std::span<const std::uint8_t> body;  // borrowed
};

struct CallHeader {
  std::uint32_t xid = 0;
  std::uint32_t rpcvers = kRpcVersion;
  std::uint32_t prog = 0;
  std::uint32_t vers = 0;
  std::uint32_t proc = 0;
  OpaqueAuth cred;
  OpaqueAuth verf;
};

struct ReplyHeader {
  std::uint32_t xid = 0;
  ReplyStat stat = ReplyStat::accepted;
  // stat == accepted
  OpaqueAuth verf;
  AcceptStat accept = AcceptStat::success;
  // accept == prog_mismatch, or reject == rpc_mismatch
  std::uint32_t low = 0;
  std::uint32_t high = 0;
  // stat == denied
  RejectStat reject = RejectStat::rpc_mismatch;
  AuthStat auth = AuthStat::ok;
};

// AUTH_SYS (AUTH_UNIX) credentials body, RFC 5531 Appendix A.
struct AuthSys {
  std::uint32_t stamp = 0;
  std::string_view machinename;  // borrowed
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t ngids = 0;
  std::array<std::uint32_t, kMaxAuthSysGroups> gids{};
};

void codec(xdr::Decoder& x, OpaqueAuth& a);
void codec(xdr::Encoder& x, OpaqueAuth& a);

// Decodes a call header; on success `d` is positioned at the procedure arguments.
// The message type must be CALL. rpcvers is returned as sent: the caller answers
// a version other than 2 with RPC_MISMATCH.
Result<CallHeader> decode_call(xdr::Decoder& d);
void encode_call(xdr::Encoder& e, const CallHeader& h);

// Decodes a reply header; on success `d` is positioned at the results.
Result<ReplyHeader> decode_reply(xdr::Decoder& d);
// MSG_ACCEPTED with an AUTH_NONE verifier; `low`/`high` only for PROG_MISMATCH.
void encode_accepted(xdr::Encoder& e, std::uint32_t xid, AcceptStat stat, std::uint32_t low = 0,
                     std::uint32_t high = 0);
void encode_rpc_mismatch(xdr::Encoder& e, std::uint32_t xid);
void encode_auth_error(xdr::Encoder& e, std::uint32_t xid, AuthStat why);

Result<AuthSys> decode_auth_sys(std::span<const std::uint8_t> body);
void encode_auth_sys(xdr::Encoder& e, const AuthSys& a);

// The xid of any RPC message (its first word), if it has one.
bool peek_xid(std::span<const std::uint8_t> msg, std::uint32_t& xid);

// The requester's side, for every call (call_sync and the asynchronous data
// path). A fresh xid: random start per process, then sequential.
std::uint32_t next_xid();

// Encodes a call header with AUTH_SYS credentials when given, else AUTH_NONE.
void encode_call_header(xdr::Encoder& e, std::uint32_t xid, std::uint32_t prog, std::uint32_t vers,
                        std::uint32_t proc, const std::optional<AuthSys>& cred);

// Checks a reply header: an error unless it is MSG_ACCEPTED/SUCCESS. On success
// `d` is positioned at the results.
Result<void> check_reply(xdr::Decoder& d, std::uint32_t xid);

Error rpc_error(std::string what);
const char* accept_stat_name(AcceptStat s);

}  // namespace nfsrdma::rpc
