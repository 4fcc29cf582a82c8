#include "client/core/nfs_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "client/core/mount_client.hpp"
#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/rdma/rdma_client.hpp"
#include "lib/transport/tcp/tcp_client.hpp"

namespace nfsrdma::client {

using namespace nfs3;

namespace {

// Per procedure, shared by every client in the process (nconnect, fio jobs).
struct ProcSeries {
  metrics::Counter* calls;
  metrics::Counter* errors;
  metrics::Histogram* seconds;
};
ProcSeries& proc_series(Proc proc) {
  static constexpr std::uint32_t kProcs = 22;
  static std::array<ProcSeries, kProcs + 1> table = [] {
    std::array<ProcSeries, kProcs + 1> t{};
    auto& r = metrics::registry();
    for (std::uint32_t i = 0; i <= kProcs; ++i) {
      metrics::Labels l = {{"proc", i < kProcs ? proc_name(i) : "other"}};
      t[i] = {&r.counter("nfsrdma_client_calls_total", "NFS calls completed, by procedure", l),
              &r.counter("nfsrdma_client_errors_total", "NFS calls that failed or returned a non-OK status (a LOOKUP's NOENT is an answer, not an error)", l),
              &r.histogram("nfsrdma_client_call_seconds", "Time from a call's submission to its reply", l)};
    }
    return t;
  }();
  auto i = static_cast<std::uint32_t>(proc);
  return table[std::min(i, kProcs)];
}

metrics::Counter& client_counter(const char* name, const char* help, const char* op = nullptr) {
  return op ? metrics::registry().counter(name, help, {{"op", op}}) : metrics::registry().counter(name, help);
}

// Made when a client connects, so they read 0 rather than being absent.
metrics::Counter& reconnects_counter() {
  return client_counter("nfsrdma_client_reconnects_total", "Reconnections after a failure or timeout");
}
metrics::Counter& retransmits_counter() {
  return client_counter("nfsrdma_client_retransmits_total", "Calls sent again after a reconnect");
}

}  // namespace

Result<std::unique_ptr<NfsClient>> NfsClient::connect(const NfsClientOptions& options) {
  if (options.caller_progress && options.proto != Proto::rdma) {
    return Error{ErrorDomain::config, EINVAL, Action::fail, "nfs: caller-driven progress is for RDMA connections only"};
  }
  std::unique_ptr<NfsClient> c(new NfsClient(options));
  reconnects_counter();
  retransmits_counter();
  char host[256] = "nfsrdma";
  ::gethostname(host, sizeof host - 1);
  c->machine_ = host;
  rpc::AuthSys& cred = c->cred_.emplace();
  cred.machinename = c->machine_;  // a view: machine_ stays
  cred.uid = options.uid;
  cred.gid = options.gid;
  auto root = mount_export(options.host, options.mount_port, options.export_path, cred, options.resvport);
  if (!root) return root.error();
  c->root_ = *root;
  if (options.port != 0) {
    c->nfs_port_ = options.port;
  } else if (options.proto == Proto::rdma) {
    c->nfs_port_ = 20049;  // RFC 5666 §9.1: the registered NFS/RDMA port
  } else {
    auto p = portmap_getport(options.host, kProgram, kVersion);
    c->nfs_port_ = p ? *p : 2049;
  }
  auto t = c->make_transports({});
  if (!t) return t.error();
  c->transports_ = std::move(*t);
  c->progressing_ = std::make_shared<const Transports>(c->transports_);
  c->maintenance_ = std::thread([p = c.get()] { p->maintenance_loop(); });
  return c;
}

NfsClient::~NfsClient() {
  stopping_ = true;
  cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  Transports old;
  std::pmr::map<std::uint32_t, Pending> left(&pending_nodes_);
  {
    std::lock_guard lk(mu_);
    old.swap(transports_);
    progressing_.reset();
    left.swap(pending_);
  }
  for (auto& t : old) t->shutdown();
  for (auto& [xid, p] : left) p.done(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"});
  for (auto& d : parked_) d(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"});
}

Result<NfsClient::Transports> NfsClient::make_transports(const std::vector<std::span<std::uint8_t>>& regions) {
  Transports out;
  for (int i = 0; i < std::max(1, options_.nconnect); ++i) {
    std::shared_ptr<rpc::ClientTransport> t;
    if (options_.proto == Proto::rdma) {
      rdma::RdmaClientOptions o;
      o.provider = options_.provider;
      o.max_credits = options_.credits;
      o.caller_progress = options_.caller_progress;
      auto c = rdma::RdmaClient::connect(options_.host, nfs_port_, o);
      if (!c) return c.error();
      t = std::move(*c);
    } else {
      auto c = tcp::TcpClient::connect(options_.host, nfs_port_, {.reserved_port = options_.resvport});
      if (!c) return c.error();
      t = std::move(*c);
    }
    for (auto r : regions) {
      if (auto reg = t->register_memory(r); !reg) return reg.error();
    }
    out.push_back(std::move(t));
  }
  return out;
}

constexpr std::size_t kSpareBuffers = 256;

std::pair<std::uint32_t, NfsClient::Buffer> NfsClient::start_call(Proc proc, const Identity* as) {
  Buffer message;
  {
    std::lock_guard lk(mu_);
    if (!spare_.empty()) {
      message = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  if (!message) {
    message = std::make_shared<std::vector<std::uint8_t>>();
    message->reserve(512);  // a call header and the arguments of any but a WRITE with its data inline
  }
  message->clear();
  std::uint32_t xid = rpc::next_xid();
  std::optional<rpc::AuthSys> theirs;
  if (as) {
    rpc::AuthSys& cred = theirs.emplace(*cred_);
    cred.uid = as->uid;
    cred.gid = as->gid;
    cred.ngids = static_cast<std::uint32_t>(std::min<std::size_t>(as->groups.size(), rpc::kMaxAuthSysGroups));
    std::copy_n(as->groups.begin(), cred.ngids, cred.gids.begin());
  }
  xdr::Encoder e(*message);
  rpc::encode_call_header(e, xid, kProgram, kVersion, static_cast<std::uint32_t>(proc), as ? theirs : cred_);
  return {xid, std::move(message)};
}

void NfsClient::recycle_locked(Buffer b) {
  // Still shared: a transmit of it has not returned yet; it goes when that ends.
  if (b && b.use_count() == 1 && spare_.size() < kSpareBuffers) spare_.push_back(std::move(b));
}

thread_local std::uint32_t CallOwner::current_ = 0;

void NfsClient::Done::operator()(Result<std::span<const std::uint8_t>> reply) {
  CallOwner as(owner);
  ProcSeries& series = proc_series(proc);
  series.calls->inc();
  // Every NFSv3 result but NULL's starts with its nfsstat3.
  if (!reply || (reply->size() >= 4 && counts_as_error(proc, xdr::load_be32(reply->data())))) series.errors->inc();
  series.seconds->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (read) return complete_read(reply, dest, read);
  if (write) return complete_write(reply, write);
  raw(std::move(reply));
}

void NfsClient::send(Proc proc, std::uint32_t xid, Buffer message, Pending p, Done done) {
  p.message = std::move(message);
  done.proc = proc;
  done.owner = CallOwner::current();
  done.started = std::chrono::steady_clock::now();
  p.done = std::move(done);
  std::optional<Outgoing> out;
  {
    std::unique_lock lk(mu_);
    if (stopping_ || (p.done.owner != 0 && std::ranges::count(cancelled_, p.done.owner) != 0)) {
      auto d = std::move(p.done);
      lk.unlock();
      return stopping_ ? d(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"})
                       : d(Error{ErrorDomain::rpc, EINTR, Action::fail, "nfs: the calling process was killed"});
    }
    out = prepare_locked(xid, pending_[xid] = std::move(p));
  }
  if (out) transmit(*out);
}

std::optional<NfsClient::Outgoing> NfsClient::prepare_locked(std::uint32_t xid, Pending& p) {
  p.generation = generation_;
  p.sent_at = std::chrono::steady_clock::now();
  if (transports_.empty() || reconnect_wanted_) return std::nullopt;  // sent again after the reconnect
  // nconnect: calls take the connections in turn.
  auto& t = transports_[next_transport_++ % transports_.size()];
  return Outgoing{xid, generation_, p.message, p.payload, p.payload_view, p.reply_payload, p.sizes, t};
}

void NfsClient::transmit(const Outgoing& o) {
  rpc::OutgoingCall call;
  call.xid = o.xid;
  call.message = *o.message;
  call.payload = o.payload ? std::span<const std::uint8_t>(*o.payload) : o.payload_view;
  call.reply_payload = o.reply_payload;
  call.reply_max_bytes = o.sizes.reply_max;
  call.reply_payload_max = o.sizes.reply_payload_max;
  // Two words of capture, which std::function keeps without allocating.
  std::uint32_t xid = o.xid;
  auto gen = static_cast<std::uint32_t>(o.generation);
  o.transport->call(call, [this, xid, gen](Result<std::span<const std::uint8_t>> reply) {
    on_reply(xid, gen, std::move(reply));
  });
}

void NfsClient::on_reply(std::uint32_t xid, std::uint32_t generation, Result<std::span<const std::uint8_t>> reply) {
  Done done;
  {
    std::lock_guard lk(mu_);
    auto it = pending_.find(xid);
    if (it == pending_.end() || static_cast<std::uint32_t>(it->second.generation) != generation) {
      return;  // answered, or resent since
    }
    if (!reply && reply.error().action != Action::fail) {
      // The connection broke under this call: keep it and reconnect.
      if (!reconnect_wanted_) {
        spdlog::info("nfs: connection to {} lost ({}); reconnecting", options_.host, reply.error().describe());
      }
      reconnect_wanted_ = true;
      cv_.notify_all();
      return;
    }
    done = std::move(it->second.done);
    recycle_locked(std::move(it->second.message));
    pending_.erase(it);
  }
  if (!reply) return done(reply.error());
  xdr::Decoder d(*reply);
  if (auto r = rpc::check_reply(d, xid); !r) return done(r.error());
  done(d.rest());
}

void NfsClient::cancel_calls_of(std::uint32_t pid) {
  std::vector<Done> ended;
  {
    std::lock_guard lk(mu_);
    if (std::ranges::count(cancelled_, pid) == 0) cancelled_.push_back(pid);
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = it->second;
      if (p.done.owner != pid) {
        ++it;
        continue;
      }
      // Sent on the connection still in use, with memory of the caller's the
      // server may still write into or read from: only a new connection
      // makes sure it never will.
      const bool on_wire = p.generation == generation_ && !transports_.empty();
      const bool exposed = !p.reply_payload.empty() || !p.payload_view.empty();
      if (on_wire && exposed && options_.proto == Proto::rdma) {
        // ORDER: answered only once the old connections are shut
        // (maintenance_loop), so the caller's buffer is not reused first.
        if (!reconnect_wanted_) {
          spdlog::info("nfs: reconnecting to {}: a cancelled call's buffer is still open to the server", options_.host);
        }
        reconnect_wanted_ = true;
        cv_.notify_all();
        parked_.push_back(std::move(p.done));
      } else {
        ended.push_back(std::move(p.done));
      }
      recycle_locked(std::move(p.message));
      it = pending_.erase(it);
    }
  }
  spdlog::debug("nfs: {} calls of process {} cancelled", ended.size(), pid);
  for (auto& d : ended) d(Error{ErrorDomain::rpc, EINTR, Action::fail, "nfs: the calling process was killed"});
}

void NfsClient::release_owner(std::uint32_t pid) {
  std::lock_guard lk(mu_);
  std::erase(cancelled_, pid);
}

bool NfsClient::has_calls_of(std::uint32_t pid) {
  std::lock_guard lk(mu_);
  return std::ranges::any_of(pending_, [pid](const auto& kv) { return kv.second.done.owner == pid; });
}

std::vector<std::uint32_t> NfsClient::owners_waiting_longer_than(std::chrono::steady_clock::duration age) {
  const auto before = std::chrono::steady_clock::now() - age;
  std::vector<std::uint32_t> out;
  std::lock_guard lk(mu_);
  for (const auto& [xid, p] : pending_) {
    const std::uint32_t o = p.done.owner;
    if (o != 0 && p.done.started < before && std::ranges::count(out, o) == 0) out.push_back(o);
  }
  return out;
}

void NfsClient::maintenance_loop() {
  const auto timeo = std::chrono::milliseconds(options_.timeo_ds * 100);
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (stopping_) break;
    // Timeouts: RDMA has no keep-alive, so a call with no answer forces a reconnect.
    auto now = std::chrono::steady_clock::now();
    std::vector<Done> expired;
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = it->second;
      if (!reconnect_wanted_ && now - p.sent_at > timeo) {
        if (!options_.hard && ++p.timeouts > options_.retrans) {
          expired.push_back(std::move(p.done));
          it = pending_.erase(it);
          continue;
        }
        spdlog::info("nfs: server {} not responding, reconnecting", options_.host);
        reconnect_wanted_ = true;
      }
      ++it;
    }
    if (!expired.empty()) {
      lk.unlock();
      for (auto& d : expired) d(Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "nfs: server " + options_.host + " timed out"});
      lk.lock();
    }
    if (!reconnect_wanted_) continue;
    // ORDER: a new generation first, so failures from the old transport are ignored.
    ++generation_;
    Transports old;
    old.swap(transports_);
    progressing_.reset();
    auto regions = regions_;  // ones added meanwhile are registered below
    std::vector<Done> parked;
    parked.swap(parked_);
    lk.unlock();
    for (auto& t : old) t->shutdown();
    old.clear();
    // Cancelled calls whose buffers the old connections could still reach.
    for (auto& d : parked) d(Error{ErrorDomain::rpc, EINTR, Action::fail, "nfs: the calling process was killed"});
    Result<Transports> fresh = make_transports(regions);
    for (int attempt = 1; !fresh && !stopping_; ++attempt) {
      if (attempt == 1 || attempt % 20 == 0) {
        spdlog::warn("nfs: reconnecting to {}: {}", options_.host, fresh.error().describe());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100 * attempt, 1000)));
      fresh = make_transports(regions);
      // A soft mount gives up on calls that have waited too long meanwhile.
      if (!options_.hard) {
        std::vector<Done> give_up;
        {
          std::lock_guard glk(mu_);
          auto t = std::chrono::steady_clock::now();
          for (auto it = pending_.begin(); it != pending_.end();) {
            if (t - it->second.sent_at > timeo * (options_.retrans + 1)) {
              give_up.push_back(std::move(it->second.done));
              it = pending_.erase(it);
            } else {
              ++it;
            }
          }
        }
        for (auto& d : give_up) d(Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "nfs: server " + options_.host + " timed out"});
      }
    }
    lk.lock();
    if (stopping_ || !fresh) break;
    transports_ = std::move(*fresh);
    progressing_ = std::make_shared<const Transports>(transports_);
    for (std::size_t i = regions.size(); i < regions_.size(); ++i) {
      for (auto& t : transports_) {
        if (auto reg = t->register_memory(regions_[i]); !reg) {
          spdlog::error("nfs: registering memory after reconnecting: {}", reg.error().describe());
        }
      }
    }
    reconnect_wanted_ = false;
    ++reconnects_;
    reconnects_counter().inc();
    retransmits_counter().inc(pending_.size());
    spdlog::info("nfs: reconnected to {}; resending {} calls", options_.host, pending_.size());
    std::vector<Outgoing> again;
    for (auto& [xid, p] : pending_) {
      if (auto o = prepare_locked(xid, p)) again.push_back(std::move(*o));
    }
    lk.unlock();
    for (const auto& o : again) transmit(o);
    lk.lock();
  }
}

std::size_t NfsClient::progress(int timeout_ms) {
  std::shared_ptr<const Transports> held;
  std::size_t first = 0;
  {
    std::lock_guard lk(mu_);
    held = progressing_;  // held here: a reconnect may drop them meanwhile
    first = next_progress_++;
  }
  static const Transports none;
  const Transports& ts = held ? *held : none;
  std::size_t ran = 0;
  bool broken = ts.empty();
  // nconnect: a look at each, then a wait on one of them in turn, in slices
  // short enough that the others' replies wait little.
  for (auto& t : ts) {
    auto n = t->progress(ts.size() == 1 ? timeout_ms : 0);
    if (n) ran += *n;
    broken |= !n;
  }
  if (ran == 0 && !broken && ts.size() > 1 && timeout_ms > 0) {
    if (auto n = ts[first % ts.size()]->progress(std::min(timeout_ms, 1))) ran = *n;
  }
  // Broken or being remade: the maintenance thread brings new connections.
  if (ran == 0 && broken && timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
  return ran;
}

void NfsClient::write(const WRITE3args& args, WriteDone done, const Identity* as) {
  // The arguments up to and including the data's length; the data goes separately.
  auto [xid, message] = start_call(Proc::WRITE, as);
  xdr::Encoder e(*message);
  codec(e, const_cast<nfs_fh3&>(args.file));
  e.u64(args.offset);
  e.u32(args.count);
  e.enumeration(args.stable);
  e.u32(static_cast<std::uint32_t>(args.data.size()));
  Pending extra;
  if (registered(args.data.data(), args.data.size())) {
    extra.payload_view = args.data;  // zero copy: the caller keeps it until `done`
  } else {
    extra.payload = std::make_shared<const std::vector<std::uint8_t>>(args.data.begin(), args.data.end());
  }
  Done d;
  d.write = std::move(done);
  send(Proc::WRITE, xid, std::move(message), std::move(extra), std::move(d));
}

void NfsClient::complete_write(Result<std::span<const std::uint8_t>>& reply, WriteDone& done) {
  if (!reply) return done(reply.error());
  WRITE3res res;
  if (auto d = xdr::decode(*reply, res); !d) return done(d.error());
  static auto& written = client_counter("nfsrdma_client_bytes_total", "File data read and written", "write");
  if (res.status == NFS3_OK) written.inc(res.count);
  done(std::move(res));
}

Result<void> NfsClient::register_memory(std::span<std::uint8_t> region) {
  std::lock_guard lk(mu_);
  for (auto& t : transports_) {
    if (auto r = t->register_memory(region); !r) return r;
  }
  regions_.push_back(region);
  return {};
}

bool NfsClient::registered(const void* p, std::size_t n) {
  std::lock_guard lk(mu_);
  auto a = reinterpret_cast<std::uintptr_t>(p);
  for (auto r : regions_) {
    auto base = reinterpret_cast<std::uintptr_t>(r.data());
    if (n > 0 && a >= base && n <= r.size() && a - base <= r.size() - n) return true;
  }
  return false;
}

void NfsClient::read(const nfs_fh3& fh, std::uint64_t offset, std::span<std::uint8_t> dest, ReadDone done,
                     const Identity* as) {
  const READ3args args{fh, offset, static_cast<std::uint32_t>(dest.size())};
  auto [xid, message] = start_call(Proc::READ, as);
  xdr::encode(*message, args);
  Pending extra;
  extra.sizes = sizes_for(Proc::READ, args);
  extra.reply_payload = dest;
  Done d;
  d.read = std::move(done);
  d.dest = dest;
  send(Proc::READ, xid, std::move(message), std::move(extra), std::move(d));
}

void NfsClient::complete_read(Result<std::span<const std::uint8_t>>& reply, std::span<std::uint8_t> dest,
                              ReadDone& done) {
  if (!reply) return done(reply.error());
  // READ3res by hand: the data is either inline, or was placed in `dest` by
  // RDMA and the reply ends at its length word (rpc::OutgoingCall::reply_payload).
  xdr::Decoder d(*reply);
  ReadResult out;
  d.enumeration(out.status);
  post_op_attr attrs;
  xdr::xdr_optional(d, attrs);
  if (d.ok() && out.status == NFS3_OK) {
    std::uint32_t len = 0;
    d.u32(out.count);
    d.boolean(out.eof);
    d.u32(len);
    if (d.ok() && (len != out.count || len > dest.size())) d.fail(xdr::Fault::bad_value);
    if (d.ok() && d.remaining() >= xdr::pad4(len)) {
      std::memcpy(dest.data(), d.rest().data(), len);  // inline (TCP, or RDMA via bounce)
      d.skip(len);
    } else if (d.ok() && d.remaining() != 0) {
      d.fail(xdr::Fault::truncated);
    }
  }
  if (auto r = d.result(); !r) return done(r.error());
  static auto& read = client_counter("nfsrdma_client_bytes_total", "File data read and written", "read");
  if (out.status == NFS3_OK) read.inc(out.count);
  done(out);
}

Result<std::uint32_t> NfsClient::read_sync(const nfs_fh3& fh, std::uint64_t offset, std::span<std::uint8_t> out,
                                           bool* eof) {
  auto box = std::make_shared<SyncBox<ReadResult>>();
  read(fh, offset, out, [box](Result<ReadResult> r) { box->set(std::move(r)); });
  auto r = wait(*box);
  if (!r) return r.error();
  if (r->status != NFS3_OK) {
    return Error{ErrorDomain::rpc, static_cast<int>(r->status), Action::fail,
                 std::string("READ: ") + nfsstat3_name(r->status)};
  }
  if (eof) *eof = r->eof;
  return r->count;
}

Result<WRITE3res> NfsClient::write_sync(const WRITE3args& args) {
  auto box = std::make_shared<SyncBox<WRITE3res>>();
  write(args, [box](Result<WRITE3res> r) { box->set(std::move(r)); });
  return wait(*box);
}

}  // namespace nfsrdma::client
