#include "client/core/nfs_client.hpp"

#include <algorithm>
#include <cstring>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/rpc/rpc.hpp"

namespace nfsrdma::client {

using namespace nfs3;

namespace {

// Per procedure, shared by every client in the process (nconnect, fio jobs).
metrics::CallSeries& proc_series(Proc proc) {
  static constexpr std::uint32_t kProcs = 22;
  static std::array<metrics::CallSeries, kProcs + 1> table = [] {
    std::array<metrics::CallSeries, kProcs + 1> t{};
    for (std::uint32_t i = 0; i <= kProcs; ++i) {
      t[i] = metrics::call_series(
          "nfsrdma_client",
          {"NFS calls completed, by procedure",
           "NFS calls that failed or returned a non-OK status (a LOOKUP's NOENT is an answer, not an error)",
           "Time from a call's submission to its reply"},
          {{"proc", i < kProcs ? proc_name(i) : "other"}});
    }
    return t;
  }();
  auto i = static_cast<std::uint32_t>(proc);
  return table[std::min(i, kProcs)];
}

metrics::Counter& client_counter(const char* name, const char* help, const char* op = nullptr) {
  return op ? metrics::registry().counter(name, help, {{"op", op}}) : metrics::registry().counter(name, help);
}

}  // namespace

Result<void> parse_source(std::string_view source, NfsClientOptions& options) {
  auto bad = [&](const std::string& why) { return Error{ErrorDomain::config, EINVAL, Action::fail, why}; };
  std::size_t colon;
  if (!source.empty() && source.front() == '[') {
    auto close = source.find(']');
    if (close == std::string_view::npos || close + 1 >= source.size() || source[close + 1] != ':') {
      return bad("'" + std::string(source) + "' is not [address]:/export");
    }
    options.host = std::string(source.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = source.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad("'" + std::string(source) + "' is not host:/export");
    options.host = std::string(source.substr(0, colon));
  }
  options.export_path = std::string(source.substr(colon + 1));
  if (options.export_path.empty() || options.export_path.front() != '/') {
    return bad("the export path in '" + std::string(source) + "' must start with /");
  }
  return {};
}

// Ended calls kept for the next ones, with the room of their buffers: about
// what a deep queue keeps in flight, and at most this much copied WRITE data.
constexpr std::size_t kFreeCalls = 256;
constexpr std::size_t kFreePayloadBytes = 32 << 20;

NfsClient::Call& NfsClient::start_call(Proc proc, const Identity* as) {
  std::unique_ptr<Call> taken;
  {
    std::lock_guard lk(mu_);
    if (!free_.empty()) {
      taken = std::move(free_.back());
      free_.pop_back();
      free_payload_bytes_ -= taken->payload_copy.capacity();
    }
  }
  if (!taken) {
    taken = std::make_unique<Call>();
    taken->client = this;
    taken->message.reserve(512);  // a call header and the arguments of any but a WRITE with its data inline
  }
  Call& c = *taken.release();  // owned by the index from send() on
  c.message.clear();
  c.xid = rpc::next_xid();
  c.done.proc = proc;
  std::optional<rpc::AuthSys> theirs;
  if (as) {
    rpc::AuthSys& cred = theirs.emplace(*cred_);
    cred.uid = as->uid;
    cred.gid = as->gid;
    cred.ngids = static_cast<std::uint32_t>(std::min<std::size_t>(as->groups.size(), rpc::kMaxAuthSysGroups));
    std::copy_n(as->groups.begin(), cred.ngids, cred.gids.begin());
  }
  xdr::Encoder e(c.message);
  rpc::encode_call_header(e, c.xid, kProgram, kVersion, static_cast<std::uint32_t>(proc), as ? theirs : cred_);
  return c;
}

void NfsClient::release(Call& c) {
  if (c.holds.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard lk(mu_);
  recycle_locked(c);
}

void NfsClient::release_locked(Call& c) {
  if (c.holds.fetch_sub(1, std::memory_order_acq_rel) == 1) recycle_locked(c);
}

void NfsClient::recycle_locked(Call& c) {
  std::unique_ptr<Call> owned(&c);
  if (free_.size() >= kFreeCalls) return;
  c.payload = {};
  c.reply_payload = {};
  c.sizes = {};
  c.done = {};
  c.sent = false;
  c.link = -1;
  c.via = 0;
  c.timeouts = 0;
  if (free_payload_bytes_ + c.payload_copy.capacity() > kFreePayloadBytes) c.payload_copy = {};
  free_payload_bytes_ += c.payload_copy.capacity();
  free_.push_back(std::move(owned));
}

thread_local std::uint32_t CallOwner::current_ = 0;

void NfsClient::Done::operator()(Result<xdr::Parts> reply) {
  CallOwner as(owner);
  metrics::CallSeries& series = proc_series(proc);
  series.calls->inc();
  // Every NFSv3 result but NULL's starts with its nfsstat3.
  if (!reply || (reply->head.size() >= 4 && counts_as_error(proc, xdr::load_be32(reply->head.data())))) {
    series.errors->inc();
  }
  series.seconds->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (read) return complete_read(reply, dest, read);
  if (write) return complete_write(reply, write);
  raw(std::move(reply));
}

void NfsClient::send(Call& c) {
  c.done.owner = CallOwner::current();
  c.done.started = std::chrono::steady_clock::now();
  c.sent_at = c.done.started;  // a soft mount's clock for a call that finds no link
  c.holds.store(1, std::memory_order_relaxed);  // the index's
  std::optional<Sending> out;
  {
    std::unique_lock lk(mu_);
    if (stopping_ || (c.done.owner != 0 && std::ranges::count(cancelled_, c.done.owner) != 0)) {
      auto d = std::move(c.done);
      release_locked(c);
      lk.unlock();
      return stopping_ ? d(Error{ErrorDomain::rpc, ECANCELED, Action::fail, "nfs: client shut down"})
                       : d(Error{ErrorDomain::rpc, EINTR, Action::fail, "nfs: the calling process was killed"});
    }
    // An xid still in flight after 2^32 calls: this one takes the next.
    for (bool added = false; !added;) {
      std::tie(c.indexed, added) = calls_.emplace(c.xid, &c);
      if (!added) {
        c.xid = rpc::next_xid();
        xdr::store_be32(c.message.data(), c.xid);
      }
    }
    out = prepare_locked(c);
  }
  if (out) transmit(*out);
}

std::optional<NfsClient::Sending> NfsClient::prepare_locked(Call& c) {
  c.link = -1;
  // The working link with the fewest calls in flight; ties in turn.
  Link* best = nullptr;
  const std::size_t n = links_.size();
  const std::size_t start = next_link_++;
  for (std::size_t k = 0; k < n; ++k) {
    Link& l = links_[(start + k) % n];
    if (l.transport && !l.failing && (!best || l.in_flight < best->in_flight)) best = &l;
  }
  if (!best) return std::nullopt;  // sent when a link comes back
  c.link = static_cast<int>(best - links_.data());
  c.via = best->connection;
  c.sent = true;
  c.sent_at = std::chrono::steady_clock::now();
  ++best->in_flight;
  ++best->calls;
  best->series.calls->inc();
  best->series.sent->inc(c.message.size() + c.payload.size());
  // The transmit's, until call() returns, and its reply handler's, which
  // may run before that (a transport reading its bytes still).
  c.holds.fetch_add(2, std::memory_order_relaxed);
  return Sending{&c, c.via, best->transport};
}

void NfsClient::transmit(const Sending& s) {
  const Call& c = *s.call;
  rpc::OutgoingCall call;
  call.xid = c.xid;
  call.message = {c.message, c.payload, {}};
  call.reply_payload = c.reply_payload;
  call.reply_max_bytes = c.sizes.reply_max;
  call.reply_payload_max = c.sizes.reply_payload_max;
  // Two words of capture, which std::function keeps without allocating.
  Call* held = s.call;
  std::uint32_t via = s.via;
  s.transport->call(call, [held, via](Result<xdr::Parts> reply) {
    held->client->on_reply(*held, via, std::move(reply));
  });
  release(*s.call);
}

void NfsClient::on_reply(Call& c, std::uint32_t via, Result<xdr::Parts> reply) {
  Done done;
  std::uint32_t xid = 0;
  {
    std::lock_guard lk(mu_);
    // Answered or ended (off its link), or resent since on another connection.
    if (c.link < 0 || c.via != via) return release_locked(c);
    Link& link = links_[c.link];
    if (!reply && (reply.error().action != Action::fail || link.failing || link.closing)) {
      // The connection broke under this call, or is being shut (which ends
      // its calls): it goes again on another.
      fail_link_locked(link, reply.error().describe());
      return release_locked(c);
    }
    if (reply) link.series.received->inc(reply->head.size() + reply->payload.size() + reply->tail.size());
    leave_link_locked(c);
    done = std::move(c.done);
    xid = c.xid;
    calls_.erase(c.indexed);
    release_locked(c);  // the index's
    release_locked(c);  // this handler's
  }
  if (!reply) return done(reply.error());
  xdr::Decoder d(*reply);
  if (auto r = rpc::check_reply(d, xid); !r) return done(r.error());
  done(d.unread());
}

void NfsClient::end_locked(Call& c, Error e, std::vector<std::pair<Done, Error>>& ended) {
  // Sent on a connection not yet shut, with memory of the caller's the
  // server may still write into or read from: only shutting that
  // connection makes sure it never will.
  const bool open = c.link >= 0 && links_[c.link].connection == c.via;
  const bool exposed = !c.reply_payload.empty() || (!c.payload.empty() && c.payload.data() != c.payload_copy.data());
  if (open && exposed && options_.proto == Proto::rdma) {
    // ORDER: answered only once that connection is shut
    // (shut_failed_links), so the caller's buffer is not reused first.
    Link& link = links_[c.link];
    fail_link_locked(link, e.code == EINTR ? "a cancelled call's buffer is still open to the server"
                                           : "a timed-out call's buffer is still open to the server");
    link.parked.emplace_back(std::move(c.done), std::move(e));
  } else {
    ended.emplace_back(std::move(c.done), std::move(e));
  }
  leave_link_locked(c);
  calls_.erase(c.indexed);
  release_locked(c);  // the index's hold
}

void NfsClient::cancel_calls_of(std::uint32_t pid) {
  std::vector<std::pair<Done, Error>> ended;
  {
    std::lock_guard lk(mu_);
    if (std::ranges::count(cancelled_, pid) == 0) cancelled_.push_back(pid);
    for (auto it = calls_.begin(); it != calls_.end();) {
      Call& c = *(it++)->second;  // end_locked unindexes it
      if (c.done.owner == pid) {
        end_locked(c, Error{ErrorDomain::rpc, EINTR, Action::fail, "nfs: the calling process was killed"}, ended);
      }
    }
  }
  spdlog::debug("nfs: {} calls of process {} cancelled", ended.size(), pid);
  for (auto& [d, e] : ended) d(std::move(e));
}

void NfsClient::release_owner(std::uint32_t pid) {
  std::lock_guard lk(mu_);
  std::erase(cancelled_, pid);
}

bool NfsClient::has_calls_of(std::uint32_t pid) {
  std::lock_guard lk(mu_);
  return std::ranges::any_of(calls_, [pid](const auto& kv) { return kv.second->done.owner == pid; });
}

std::vector<std::uint32_t> NfsClient::owners_waiting_longer_than(std::chrono::steady_clock::duration age) {
  const auto before = std::chrono::steady_clock::now() - age;
  std::vector<std::uint32_t> out;
  std::lock_guard lk(mu_);
  for (const auto& [xid, c] : calls_) {
    const std::uint32_t o = c->done.owner;
    if (o != 0 && c->done.started < before && std::ranges::count(out, o) == 0) out.push_back(o);
  }
  return out;
}

void NfsClient::write(const WRITE3args& args, WriteDone done, const Identity* as) {
  // The arguments up to and including the data's length; the data goes separately.
  Call& c = start_call(Proc::WRITE, as);
  xdr::Encoder e(c.message);
  codec(e, const_cast<nfs_fh3&>(args.file));
  e.u64(args.offset);
  e.u32(args.count);
  e.enumeration(args.stable);
  e.u32(static_cast<std::uint32_t>(args.data.size()));
  if (registered(args.data.data(), args.data.size())) {
    c.payload = args.data;  // zero copy: the caller keeps it until `done`
  } else {
    c.payload_copy.assign(args.data.begin(), args.data.end());
    c.payload = c.payload_copy;
  }
  c.done.write = std::move(done);
  send(c);
}

void NfsClient::complete_write(Result<xdr::Parts>& reply, WriteDone& done) {
  if (!reply) return done(reply.error());
  WRITE3res res;
  if (auto d = xdr::decode(*reply, res); !d) return done(d.error());
  static auto& written = client_counter("nfsrdma_client_bytes_total", "File data read and written", "write");
  if (res.status == NFS3_OK) written.inc(res.count);
  done(std::move(res));
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
  Call& c = start_call(Proc::READ, as);
  xdr::encode(c.message, args);
  c.sizes = sizes_for(Proc::READ, args);
  c.reply_payload = dest;
  c.done.read = std::move(done);
  c.done.dest = dest;
  send(c);
}

void NfsClient::complete_read(Result<xdr::Parts>& reply, std::span<std::uint8_t> dest, ReadDone& done) {
  if (!reply) return done(reply.error());
  // READ3res by hand: the data is inline, or the reply's payload where the
  // Write chunk put it: in `dest` (registered memory) or a bounce buffer.
  xdr::Decoder d(*reply);
  ReadResult out;
  d.enumeration(out.status);
  post_op_attr attrs;
  xdr::xdr_optional(d, attrs);
  if (d.ok() && out.status == NFS3_OK) {
    std::span<const std::uint8_t> data;
    d.u32(out.count);
    d.boolean(out.eof);
    d.opaque_view(data, static_cast<std::uint32_t>(dest.size()));
    if (d.ok() && data.size() != out.count) d.fail(xdr::Fault::bad_value);
    if (d.ok() && !data.empty() && data.data() != dest.data()) {
      std::memcpy(dest.data(), data.data(), data.size());  // inline, or from an RDMA bounce buffer
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
