#include "server/dispatcher.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

#include "lib/base/log.hpp"
#include "lib/base/siphash.hpp"
#include "lib/nfs3/mount3.hpp"
#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "server/rpc_callback.hpp"

namespace nfsrdma::server {

namespace {

struct Program {
  std::uint32_t prog;
  std::uint32_t vers;
  const char* name;
};

constexpr Program kProgramTable[] = {{nfs3::kProgram, nfs3::kVersion, "NFS"},
                                  {mount3::kProgram, mount3::kVersion, "MOUNT"},
                                  {portmap2::kProgram, portmap2::kVersion, "PORTMAP"},
                                  {nlm4::kProgram, nlm4::kVersion, "NLM"},
                                  {nsm1::kProgram, nsm1::kVersion, "NSM"}};

// The program a call on `listener` is for; on the lock port, the one it names.
Program program_for(int listener, std::uint32_t prog) {
  switch (listener) {
    case kNfsListener: return kProgramTable[0];
    case kMountListener: return kProgramTable[1];
    case kPortmapListener: return kProgramTable[2];
    case kLockListener: return prog == nsm1::kProgram ? kProgramTable[4] : kProgramTable[3];
    default: return {0, 0, "?"};
  }
}

const char* proc_name(const Program& p, std::uint32_t proc) {
  if (p.prog == nfs3::kProgram) return nfs3::proc_name(proc);
  if (p.prog == mount3::kProgram) return mount3::proc_name(proc);
  if (p.prog == nlm4::kProgram) return nlm4::proc_name(proc);
  if (p.prog == nsm1::kProgram) return nsm1::proc_name(proc);
  return portmap2::proc_name(proc);
}

}  // namespace

constexpr const char* kClientHelp = "Calls answered, by client address (the first 256 addresses; the rest as other)";
constexpr const char* kInlineHelp =
    "Calls tried on the thread that received them (the connection's event loop), by kind (read: "
    "NULL, GETATTR, ACCESS, LOOKUP, READ; write; change: SETATTR, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, "
    "RENAME, LINK): run there, or passed to a worker";

Dispatcher::Dispatcher(NfsService& nfs, MountService& mount, PortmapService* portmap, DuplicateRequestCache& drc,
                       NlmService* nlm, StatusMonitor* nsm)
    : nfs_(nfs), mount_(mount), portmap_(portmap), drc_(drc), nlm_(nlm), nsm_(nsm),
      drc_hits_(metrics::registry().counter("nfsrdma_server_drc_hits_total",
                                            "Retransmitted calls answered from the duplicate request cache")) {
  auto& r = metrics::registry();
  for (std::size_t kind = 0; kind < inline_.size(); ++kind) {
    for (bool ran : {false, true}) {
      inline_[kind][ran] = &r.counter("nfsrdma_server_inline_calls_total", kInlineHelp,
                                      {{"kind", std::array{"read", "write", "change"}[kind]},
                                       {"result", ran ? "ran" : "worker"}});
    }
  }
  auto make = [&](const char* program, const char* proc) {
    return metrics::call_series(
        "nfsrdma_server",
        {"Calls answered, by program and procedure",
         "Calls answered with an RPC error or a non-OK status (a LOOKUP's NOENT is an answer, not an error)",
         "Time from a call's arrival to its reply"},
        {{"program", program}, {"proc", proc}});
  };
  for (std::uint32_t p = 0; p < kPrograms; ++p) {
    for (std::uint32_t proc = 0; proc < kProcs; ++proc) {
      const char* name = proc_name(kProgramTable[p], proc);
      if (std::string_view(name) != "?") series_[p * kProcs + proc] = make(kProgramTable[p].name, name);
    }
  }
  series_.back() = make("other", "other");
  for (bool rdma : {false, true}) {
    transport_calls_[rdma] = &r.counter("nfsrdma_server_transport_calls_total", "Calls answered, by transport",
                                        {{"transport", rdma ? "rdma" : "tcp"}});
  }
  other_client_calls_ = &r.counter("nfsrdma_server_client_calls_total", kClientHelp, {{"client", "other"}});
}

metrics::Counter& Dispatcher::client_calls(const sockaddr_storage& addr) {
  const auto key = to_v6(addr);
  // A thread's calls mostly come from the address its last call came from:
  // that series is found with no lock (series never move once made).
  thread_local struct {
    const Dispatcher* by = nullptr;
    std::array<std::uint8_t, 16> key{};
    metrics::Counter* series = nullptr;
  } last;
  if (last.by == this && last.key == key) return *last.series;
  metrics::Counter& found = client_calls_locked(key, addr);
  last = {this, key, &found};
  return found;
}

metrics::Counter& Dispatcher::client_calls_locked(const std::array<std::uint8_t, 16>& key,
                                                  const sockaddr_storage& addr) {
  {
    std::shared_lock lk(clients_mu_);
    if (auto it = client_calls_.find(key); it != client_calls_.end()) return *it->second;
    if (client_calls_.size() >= kClientSeries) return *other_client_calls_;
  }
  std::lock_guard lk(clients_mu_);
  if (client_calls_.size() >= kClientSeries && !client_calls_.contains(key)) return *other_client_calls_;
  auto& slot = client_calls_[key];
  if (!slot) slot = &metrics::registry().counter("nfsrdma_server_client_calls_total", kClientHelp, {{"client", address_text(addr)}});
  return *slot;
}

Dispatcher::Series& Dispatcher::series(std::uint32_t prog, std::uint32_t proc) {
  std::uint32_t p = 0;
  while (p < kPrograms && kProgramTable[p].prog != prog) ++p;
  if (p == kPrograms || proc >= kProcs || !series_[p * kProcs + proc].calls) return series_.back();
  return series_[p * kProcs + proc];
}

// The DRC's checksum of a call: its length and at most its first 256 bytes
// after the xid, as Linux nfsd does (RC_CSUMLEN), taken from the XDR stream
// whichever way the transport split it. With the xid, address and procedure
// that tells a retransmission from a new call reusing an xid, without hashing
// a megabyte of WRITE data per call. Not a secret: the key is 0.
static std::uint64_t call_checksum(const xdr::Parts& message) {
  constexpr std::size_t kBytes = 256;
  std::array<std::uint8_t, 8 + kBytes> head{};
  const std::uint64_t len = message.stream_bytes();
  std::memcpy(head.data(), &len, 8);
  const std::size_t n = len > 4 ? std::min<std::size_t>(kBytes, len - 4) : 0;
  message.copy(4, n, head.data() + 8);
  return siphash24(SipKey{}, std::span(head).first(8 + n));
}

std::size_t Dispatcher::reply_bound(std::span<const std::uint8_t> call, std::size_t otherwise) const {
  constexpr std::size_t kReplyHeader = 64;  // xid, accepted reply, verifier, status
  xdr::Decoder d(call);
  auto h = rpc::decode_call(d);
  if (!h || h->prog != nfs3::kProgram) return otherwise;
  return kReplyHeader + nfs_.result_bound(h->proc, d);
}

void Dispatcher::handle(rpc::IncomingCall&& call) { run(call, true); }

bool Dispatcher::handle_inline(rpc::IncomingCall& call) {
  if (call.listener != kNfsListener) return false;
  xdr::Decoder d(call.message);
  auto h = rpc::decode_call(d);
  if (!h || h->prog != nfs3::kProgram) return false;
  auto proc = static_cast<nfs3::Proc>(h->proc);
  using P = nfs3::Proc;
  std::size_t kind = 0;
  switch (proc) {
    case P::NULL_: case P::GETATTR: case P::ACCESS: case P::LOOKUP: case P::READ:
      break;
    case P::WRITE:
      kind = 1;
      break;
    case P::SETATTR: case P::CREATE: case P::MKDIR: case P::SYMLINK: case P::MKNOD: case P::REMOVE: case P::RMDIR:
    case P::RENAME: case P::LINK:
      kind = 2;
      break;
    default:
      return false;
  }
  bool ran = run(call, false);
  inline_[kind][ran]->inc();
  return ran;
}

bool Dispatcher::run(rpc::IncomingCall& call, bool may_block) {
  const auto started = std::chrono::steady_clock::now();
  const rpc::Peer& peer = call.channel->peer();
  xdr::Decoder d(call.message);
  auto h = rpc::decode_call(d);
  if (!h) {
    // Without a sound header there is nobody to answer (RFC 5531 §9).
    NFSRDMA_LOG_LIMITED(info, "rpc: undecodable call header from {}: {}", peer.describe(), h.error().describe());
    call.channel->drop();
    return true;
  }
  rpc::ReplyMessage reply;
  reply.bytes = std::move(call.reply_buffer);
  reply.bytes.clear();
  xdr::Encoder out(reply.bytes);
  auto send = [&] {
    call.channel->send(std::move(reply));
    return true;
  };

  if (h->rpcvers != rpc::kRpcVersion) {
    NFSRDMA_LOG_LIMITED(info, "rpc: call from {} with RPC version {}", peer.describe(), h->rpcvers);
    rpc::encode_rpc_mismatch(out, h->xid);
    return send();
  }
  const Program prog = program_for(call.listener, h->prog);
  if (h->prog != prog.prog) {
    NFSRDMA_LOG_LIMITED(info, "rpc: {} called program {} on the {} port", peer.describe(), h->prog, prog.name);
    rpc::encode_accepted(out, h->xid, rpc::AcceptStat::prog_unavail);
    return send();
  }
  if (h->vers != prog.vers) {
    spdlog::debug("rpc: {} called {} version {}", peer.describe(), prog.name, h->vers);
    rpc::encode_accepted(out, h->xid, rpc::AcceptStat::prog_mismatch, prog.vers, prog.vers);
    return send();
  }

  CallContext ctx{peer, {}, false, call.secure, may_block, false, call.reply_area, call.pipes};
  if (h->cred.flavor == rpc::AuthFlavor::sys) {
    auto sys = rpc::decode_auth_sys(h->cred.body);
    if (!sys) {
      NFSRDMA_LOG_LIMITED(info, "rpc: bad AUTH_SYS credentials from {}", peer.describe());
      rpc::encode_auth_error(out, h->xid, rpc::AuthStat::badcred);
      return send();
    }
    ctx.caller.uid = sys->uid;
    ctx.caller.gid = sys->gid;
    ctx.caller.ngroups = sys->ngids;
    std::copy(sys->gids.begin(), sys->gids.begin() + sys->ngids, ctx.caller.groups.begin());
  } else if (h->cred.flavor == rpc::AuthFlavor::none) {
    ctx.anonymous = true;
  } else {
    NFSRDMA_LOG_LIMITED(info, "rpc: {} used unsupported auth flavor {}", peer.describe(), static_cast<std::uint32_t>(h->cred.flavor));
    rpc::encode_auth_error(out, h->xid, rpc::AuthStat::tooweak);
    return send();
  }

  const bool cached = prog.prog == nfs3::kProgram && nfs3::is_non_idempotent(static_cast<nfs3::Proc>(h->proc));
  DuplicateRequestCache::Key key;
  if (cached) {
    key.xid = h->xid;
    key.addr = to_v6(peer.addr);
    key.prog = h->prog;
    key.vers = h->vers;
    key.proc = h->proc;
    key.checksum = call_checksum(call.message);
    switch (drc_.begin(key, reply.bytes)) {
      case DuplicateRequestCache::Verdict::in_progress:
        spdlog::debug("rpc: dropping retransmission of xid {:#x} from {} still in progress", h->xid, peer.describe());
        call.channel->drop();
        return true;
      case DuplicateRequestCache::Verdict::replay:
        spdlog::debug("rpc: replaying cached reply for xid {:#x} from {}", h->xid, peer.describe());
        drc_hits_.inc();
        return send();
      case DuplicateRequestCache::Verdict::execute:
        break;
    }
  }

  rpc::encode_accepted(out, h->xid, rpc::AcceptStat::success);
  const std::size_t result_at = reply.bytes.size();  // every NFS and MOUNT result starts with its status
  rpc::AcceptStat stat = rpc::AcceptStat::success;
  if (prog.prog == nfs3::kProgram) {
    stat = nfs_.handle(ctx, h->proc, d, out, reply);
  } else if (prog.prog == mount3::kProgram) {
    stat = mount_.handle(ctx, h->proc, d, out);
  } else if (prog.prog == nlm4::kProgram && nlm_) {
    stat = nlm_->handle(ctx, h->proc, d, out);
  } else if (prog.prog == nsm1::kProgram && nsm_) {
    stat = nsm_->handle(ctx, h->proc, d, out);
  } else if (prog.prog == portmap2::kProgram && portmap_) {
    stat = portmap_->handle(ctx, h->proc, d, out);
  } else {
    stat = rpc::AcceptStat::prog_unavail;
  }
  if (ctx.would_block) {
    // Nothing was done: the worker runs it from the start, entry and all.
    if (cached) drc_.abandon(key);
    call.reply_buffer = std::move(reply.bytes);  // for the worker that runs it again
    return false;
  }
  if (stat != rpc::AcceptStat::success) {
    NFSRDMA_LOG_LIMITED(info, "rpc: {} {} from {}: {}", prog.name, proc_name(prog, h->proc), peer.describe(),
                 rpc::accept_stat_name(stat));
    out.truncate(0);
    reply.unsplit();
    rpc::encode_accepted(out, h->xid, stat);
  }
  if (cached) {
    if (stat == rpc::AcceptStat::success) {
      drc_.finish(key, reply.bytes);
    } else {
      drc_.abandon(key);
    }
  }
  Series& m = series(h->prog, h->proc);
  m.calls->inc();
  transport_calls_[call.rdma]->inc();
  client_calls(peer.addr).inc();
  bool failed = stat != rpc::AcceptStat::success;
  bool has_status = prog.prog == nfs3::kProgram || (prog.prog == mount3::kProgram && h->proc == 1);  // MNT
  if (!failed && has_status && reply.bytes.size() >= result_at + 4) {
    const auto* b = reply.bytes.data() + result_at;
    const std::uint32_t status = xdr::load_be32(b);  // NFS3_OK and MNT3_OK are 0
    failed = prog.prog == nfs3::kProgram ? nfs3::counts_as_error(static_cast<nfs3::Proc>(h->proc), status) : status != 0;
  }
  if (failed) m.errors->inc();
  send();
  m.seconds->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return true;
}

}  // namespace nfsrdma::server
