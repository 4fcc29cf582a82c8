// An asynchronous NFSv3 client over either transport, shared by the FUSE client
// and the fio engine: every procedure is call<Res>(proc, args, done), with the
// transfer sizes RPC-over-RDMA needs worked out from the procedure.
//
// Theory of operation: the client keeps several links (nconnect, spread over
// the local and server addresses given: multi-rail), each one connection.
// A call goes on the working link with the fewest calls in flight, and is
// kept (encoded, with its xid) until its reply arrives. A link whose
// transport fails, or with a call older than `timeo` (RDMA has no
// keep-alive: a timeout is the only sign of a dead peer), is shut by the
// maintenance thread; its calls go again, xid unchanged, on the links still
// working (or wait for one), and it reconnects alone, backing off, and takes
// calls again once it is back. Over one link, a retransmission reaches the
// server's duplicate request cache; on another address the cache (keyed on
// the client's address, as nfsd's) does not know it, which only matters for
// a non-idempotent call the server had run. hard (default): calls wait
// through outages; soft: a call fails with ETIMEDOUT after `retrans`
// timeouts. Callbacks run on a transport thread, or with `caller_progress`
// on the thread in progress(); spans in a result (READ data) live only
// during the callback.
//
// Owners: a call belongs to the process CallOwner names on the thread that
// makes it, and the calls its callback makes inherit that owner, so a chain
// of calls made for one FUSE request all belong to its caller.
// cancel_calls_of(pid) ends that process's calls at once with EINTR (hard
// mount or not: the process was killed) and fails any it makes later, until
// release_owner(pid).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory_resource>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lib/base/metrics.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/rpc/rpc.hpp"
#include "lib/rpc/transport.hpp"

namespace nfsrdma::client {

enum class Proto : std::uint8_t { rdma, tcp };

struct NfsClientOptions {
  std::string host;
  std::string export_path;
  Proto proto = Proto::rdma;
  std::uint16_t port = 0;        // 0: 20049 for rdma; for tcp the portmapper's answer, else 2049
  std::uint16_t mount_port = 0;  // 0: ask the portmapper
  std::string provider;          // libfabric provider for rdma
  std::uint32_t credits = 128;   // most RDMA calls in flight we accept
  int nconnect = 1;              // connections to the server; calls are spread over them
  // Multi-rail: connection i goes from local_addrs[i % L] to
  // remote_addrs[i % R], and there are at least max(L, R) of them. Empty:
  // `host`, from the address its route picks.
  std::vector<std::string> remote_addrs, local_addrs;
  int timeo_ds = 600;            // mount.nfs units: tenths of a second
  int retrans = 2;
  bool hard = true;
  bool resvport = true;          // TCP from a source port below 1024 when root (RDMA has no such port)
  std::uint32_t uid = 0, gid = 0;  // AUTH_SYS identity unless a call gives its own
  // The connections have no threads of their own; the owner
  // drives them with progress() and callbacks run on its thread (the fio
  // engine reaps in getevents). The *_sync calls drive it themselves.
  bool caller_progress = false;
};

// The process the calls made on this thread are for (0: none), for this
// scope; see "Owners" above.
class CallOwner {
 public:
  explicit CallOwner(std::uint32_t pid) : saved_(current_) { current_ = pid; }
  ~CallOwner() { current_ = saved_; }
  CallOwner(const CallOwner&) = delete;
  CallOwner& operator=(const CallOwner&) = delete;
  static std::uint32_t current() { return current_; }

 private:
  std::uint32_t saved_;
  static thread_local std::uint32_t current_;
};

// "a~b~c" (the vendor multipath clients' separator: a comma ends the mount
// option) as addresses, at most 16, none empty.
Result<std::vector<std::string>> parse_address_list(const std::string& option, const std::string& value);

// "host:/export", or "[address]:/export" for IPv6, into options.host and
// options.export_path: the one spelling of a server's export everywhere.
Result<void> parse_source(std::string_view source, NfsClientOptions& options);

struct Identity {
  std::uint32_t uid = 0, gid = 0;
  std::vector<std::uint32_t> groups;  // at most 16 are sent
};

class NfsClient {
 public:
  using Transports = std::vector<std::shared_ptr<rpc::ClientTransport>>;
  // Mounts (MOUNT over TCP), then connects the NFS transport.
  static Result<std::unique_ptr<NfsClient>> connect(const NfsClientOptions& options);
  ~NfsClient();
  // Ends the links (their threads joined) and answers every call still
  // waiting with ECANCELED, on this thread; a call made after it is answered
  // so at once. Idempotent; the destructor calls it.
  void shutdown();

  const nfs3::nfs_fh3& root() const { return root_; }
  const NfsClientOptions& options() const { return options_; }

  // With NfsClientOptions::caller_progress: runs the callbacks of the replies
  // that arrived, waiting up to `timeout_ms` (0: not at all) for the first.
  // Returns how many ran; 0 while the connection is being remade.
  std::size_t progress(int timeout_ms);
  // Calls made on the client while a SendBatch lives (resends by its own
  // threads too) may wait and leave together when it ends
  // (ClientTransport::hold_sends): the fio engine's commit sends what fio
  // queued with one write over TCP.
  class SendBatch {
   public:
    explicit SendBatch(NfsClient& client);
    ~SendBatch();
    SendBatch(const SendBatch&) = delete;
    SendBatch& operator=(const SendBatch&) = delete;

   private:
    std::shared_ptr<const Transports> held_;  // the links' transports when it began
  };
  std::uint64_t reconnects() const { return reconnects_; }
  // Each link's state, for tests and logs.
  struct LinkState {
    std::string local, remote;
    bool up = false;
    std::uint64_t calls = 0;  // sent on it, resent ones included
  };
  std::vector<LinkState> links();

  // Ends every call of process `pid` with EINTR, and each it makes from now
  // until release_owner(pid). A cancelled call whose buffer the server could
  // still reach (a READ or WRITE in registered memory on a live RDMA
  // connection) makes the client reconnect, and is answered once the old
  // connection is shut, so no late RDMA Write lands in a buffer given back.
  void cancel_calls_of(std::uint32_t pid);
  void release_owner(std::uint32_t pid);
  bool has_calls_of(std::uint32_t pid);
  // The owners of calls sent more than `age` ago and not answered.
  std::vector<std::uint32_t> owners_waiting_longer_than(std::chrono::steady_clock::duration age);

  using RawDone = std::function<void(Result<xdr::Parts>)>;

  template <class Res, class Args>
  void call(nfs3::Proc proc, const Args& args, std::function<void(Result<Res>)> done,
            const Identity* as = nullptr) {
    Call& c = start_call(proc, as);
    xdr::encode(c.message, args);
    c.sizes = sizes_for(proc, args);
    c.done.raw = [done = std::move(done)](auto reply) {
      if (!reply) return done(reply.error());
      Res res;
      if (auto dec = xdr::decode(*reply, res); !dec) return done(dec.error());
      done(std::move(res));
    };
    send(c);
  }

  // Registers memory the caller owns for the client's life (fio's I/O
  // buffers): WRITE data in it is sent in place and READ data lands in it by
  // RDMA Write, with no copy in the client. Kept across reconnects.
  Result<void> register_memory(std::span<std::uint8_t> region);

  // WRITE with its data passed as the DDP-eligible payload (a Read chunk over
  // RDMA). Data in registered memory must stay unchanged until `done` runs.
  using WriteDone = std::function<void(Result<nfs3::WRITE3res>)>;
  void write(const nfs3::WRITE3args& args, WriteDone done, const Identity* as = nullptr);

  struct ReadResult {
    nfs3::nfsstat3 status = nfs3::NFS3_OK;
    std::uint32_t count = 0;
    bool eof = false;
  };
  // READ into `dest` (at most dest.size() bytes); over RDMA into registered
  // memory the server writes straight into `dest`.
  using ReadDone = std::function<void(Result<ReadResult>)>;
  void read(const nfs3::nfs_fh3& fh, std::uint64_t offset, std::span<std::uint8_t> dest, ReadDone done,
            const Identity* as = nullptr);

  // Synchronous wrappers that wait on the asynchronous calls (libnfs style).
  template <class Res, class Args>
  Result<Res> call_sync(nfs3::Proc proc, const Args& args, const Identity* as = nullptr) {
    auto box = std::make_shared<SyncBox<Res>>();
    call<Res>(proc, args, [box](Result<Res> r) { box->set(std::move(r)); }, as);
    return wait(*box);
  }
  // READ into `out`; returns the bytes read (eof when fewer than asked).
  Result<std::uint32_t> read_sync(const nfs3::nfs_fh3& fh, std::uint64_t offset, std::span<std::uint8_t> out,
                                  bool* eof = nullptr);
  Result<nfs3::WRITE3res> write_sync(const nfs3::WRITE3args& args);

 private:
  struct Sizes {
    std::uint32_t reply_max = 0, reply_payload_max = 0;
  };
  // How a call ends: the metrics every completion counts (reply, error,
  // timeout), then the caller's callback. READ and WRITE keep theirs typed,
  // so that completing them wraps nothing in another std::function (which
  // would allocate per call). Moved out of the call to run once mu_ is released.
  struct Done {
    nfs3::Proc proc{};
    std::uint32_t owner = 0;  // CallOwner when it was made; its callback runs as that owner
    std::chrono::steady_clock::time_point started;
    RawDone raw;  // any procedure
    ReadDone read;
    std::span<std::uint8_t> dest;  // READ: where the data goes
    WriteDone write;
    void operator()(Result<xdr::Parts> reply);  // the reply's result, past its RPC header
  };
  // One call, from its encoding to its end: the one record of it, indexed
  // once by xid (calls_) and kept for the next call when it ends (free_), so
  // its buffers keep their room. The index holds it (`holds`) until it is
  // answered or ended; each transmit holds it until the transport's call()
  // returns, and again until the transport ran its reply handler, so the
  // transport may send its bytes later and the handler finds the record by
  // pointer, not by xid.
  struct Call {
    NfsClient* client = nullptr;  // the owner, for the reply handler
    std::uint32_t xid = 0;
    // The wire's part, unchanged while it is carried.
    std::vector<std::uint8_t> message;       // the whole call: header, args up to the payload
    std::vector<std::uint8_t> payload_copy;  // WRITE data from memory not registered, copied
    std::span<const std::uint8_t> payload;   // DDP-eligible WRITE data: payload_copy, or registered memory
    std::span<std::uint8_t> reply_payload;   // where READ data should land
    Sizes sizes;
    Done done;
    // Under mu_.
    bool sent = false;          // went out at least once (a resend counts as a retransmission)
    int link = -1;              // the link it went out on; -1 while it waits for one
    std::uint32_t via = 0;      // that link's connection (Link::connection) when it did
    std::chrono::steady_clock::time_point sent_at;
    int timeouts = 0;
    std::pmr::map<std::uint32_t, Call*>::iterator indexed;  // its place in calls_, while it is there
    std::atomic<int> holds{0};  // not under mu_: the index's, the transmits' and the handlers'; back to free_ at 0
  };
  template <class Res>
  struct SyncBox {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<Res>> value;
    void set(Result<Res> r) {
      std::lock_guard lk(mu);
      value.emplace(std::move(r));
      cv.notify_all();
    }
    Result<Res> get() {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return value.has_value(); });
      return std::move(*value);
    }
    bool ready() {
      std::lock_guard lk(mu);
      return value.has_value();
    }
  };
  template <class Res>
  Result<Res> wait(SyncBox<Res>& box) {
    while (options_.caller_progress && !box.ready()) progress(100);
    return box.get();
  }

  explicit NfsClient(const NfsClientOptions& o) : options_(o) {}
  template <class Args>
  static Sizes sizes_for(nfs3::Proc proc, const Args& args);
  // A call from free_ with a new xid and the RPC call header in its message;
  // the caller appends the arguments and send()s it.
  Call& start_call(nfs3::Proc proc, const Identity* as);
  void send(Call& c);
  // Drops one hold on `c`; the last returns it to free_.
  void release(Call& c);
  void release_locked(Call& c);
  void recycle_locked(Call& c);  // to free_, or deleted
  static void complete_read(Result<xdr::Parts>& reply, std::span<std::uint8_t> dest, ReadDone& done);
  static void complete_write(Result<xdr::Parts>& reply, WriteDone& done);
  bool registered(const void* p, std::size_t n);
  // A call on its way out on a link, built under mu_ (which holds the call
  // for the transmit), sent after it is released, since a transport may run
  // the reply callback from inside call().
  struct Sending {
    Call* call;
    std::uint32_t via;
    std::shared_ptr<rpc::ClientTransport> transport;
  };
  // Puts `c` on the working link with the fewest calls in flight; none
  // while every link is down (it is sent when one comes back).
  std::optional<Sending> prepare_locked(Call& c);
  void transmit(const Sending& s);
  // The handler of `c`'s transmit on connection `via`: once per transmit.
  void on_reply(Call& c, std::uint32_t via, Result<xdr::Parts> reply);

  // One connection of the mount, by addresses; its transport while it works.
  // Per connection index, shared by every client in the process (fio jobs).
  struct LinkSeries {
    metrics::Counter* calls;
    metrics::Counter* sent;
    metrics::Counter* received;
    metrics::Gauge* up;
  };
  struct Link {
    std::string local, remote;  // local empty: the route's
    std::shared_ptr<rpc::ClientTransport> transport;  // null while down
    std::uint32_t connection = 0;  // which transport: unique in the client, so late replies are known
    bool failing = false;          // to be shut by the maintenance thread
    bool closing = false;          // being shut: its calls wait, it is not reconnected yet
    std::uint32_t in_flight = 0;
    int attempts = 0;              // connects failed since it went down
    std::chrono::steady_clock::time_point retry_at;
    // Calls ended (cancelled, or a soft mount's timeout) whose buffers this
    // connection could still reach: answered with their error once it is shut.
    std::vector<std::pair<Done, Error>> parked;
    std::uint64_t calls = 0;
    LinkSeries series{};
    std::string name() const;
  };
  // A transport for `link`, with `regions` registered.
  Result<std::shared_ptr<rpc::ClientTransport>> make_transport(const Link& link,
                                                               const std::vector<std::span<std::uint8_t>>& regions);
  void link_up_locked(Link& link, std::shared_ptr<rpc::ClientTransport> t, std::size_t registered);
  void fail_link_locked(Link& link, const std::string& why);
  void leave_link_locked(Call& c);  // c no longer counts as in flight on its link
  // Ends `c` with `e` and unindexes it: its Done into `ended` to be answered
  // once mu_ is released, or parked on its link when memory of the caller's
  // is open to the server there.
  void end_locked(Call& c, Error e, std::vector<std::pair<Done, Error>>& ended);
  // Sends the calls waiting for a link; after mu_ is released.
  std::vector<Sending> place_waiting_locked();
  // Timeouts and failed links (shut, their calls sent again elsewhere); and,
  // on a thread of its own so that a slow connect delays neither, links
  // brought back.
  void maintenance_loop();
  void shut_failed_links(std::unique_lock<std::mutex>& lk);
  void reconnect_loop();

  NfsClientOptions options_;
  nfs3::nfs_fh3 root_;
  std::string machine_;
  std::optional<rpc::AuthSys> cred_;  // AUTH_SYS of the options' uid and gid, made once; views machine_
  std::uint16_t nfs_port_ = 0;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::vector<Link> links_;  // fixed at connect
  // The working links' transports as progress() takes them (a reference,
  // not a copy per call); remade when a link goes down or comes back.
  std::shared_ptr<const Transports> progressing_;
  std::size_t next_link_ = 0;      // ties between links go in turn
  // progress() with nothing to run yet over several connections: waits on
  // all of them at once, up to `timeout_ms`, and runs what comes.
  static std::size_t wait_any(const Transports& ts, int timeout_ms);
  std::uint32_t connections_ = 0;  // transports made, for Link::connection
  std::pmr::unsynchronized_pool_resource call_nodes_;  // calls_'s, kept for the next calls
  std::pmr::map<std::uint32_t, Call*> calls_{&call_nodes_};  // by xid, in the order they were made
  std::vector<std::unique_ptr<Call>> free_;  // ended calls kept for their room, at most kFreeCalls
  std::size_t free_payload_bytes_ = 0;       // the room of their payload copies, at most kFreePayloadBytes
  std::vector<std::uint32_t> cancelled_;  // owners whose calls fail at once (cancel_calls_of)
  std::vector<std::span<std::uint8_t>> regions_;
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<bool> stopping_{false};
  std::thread maintenance_, reconnector_;
};

template <class Args>
NfsClient::Sizes NfsClient::sizes_for(nfs3::Proc proc, const Args& args) {
  // Reply sizes bound what RPC-over-RDMA offers (Write and Reply chunks).
  // A READ's part around its data is bounded exactly, so a Write chunk goes
  // alone whenever an inline reply can hold that part (chunk_plan.hpp): the
  // RPC reply header with the longest verifier (24 + 400 bytes), then status,
  // post-op attributes, count, eof and the data's length (104).
  constexpr std::uint32_t kReadRest = 24 + rpc::kMaxAuthBytes + 104;
  // Other replies: the RPC header and the attributes around their listing.
  constexpr std::uint32_t kSlack = 1024;
  if constexpr (std::is_same_v<Args, nfs3::READ3args>) {
    if (proc == nfs3::Proc::READ) return {static_cast<std::uint32_t>(xdr::pad4(args.count)) + kReadRest, args.count};
  } else if constexpr (std::is_same_v<Args, nfs3::READDIR3args>) {
    return {args.count + kSlack, 0};
  } else if constexpr (std::is_same_v<Args, nfs3::READDIRPLUS3args>) {
    return {args.maxcount + kSlack, 0};
  } else if constexpr (std::is_same_v<Args, nfs3::FhArgs>) {
    if (proc == nfs3::Proc::READLINK) return {nfs3::kMaxPath + kSlack, 0};
  }
  return {};
}

}  // namespace nfsrdma::client
