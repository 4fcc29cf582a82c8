// One RPC-over-RDMA connection of RdmaServer (rdma_server.hpp has the theory
// of operation): its endpoint, posted receives, send buffers and requests,
// moved on by the event loop it belongs to (progress_loop.hpp). Internal to
// lib/transport/rdma.
#pragma once

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "lib/base/metrics.hpp"
#include "lib/base/trace_ring.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "lib/transport/rdma/progress_loop.hpp"
#include "lib/transport/rdma/rdma_server.hpp"

namespace nfsrdma::rdma {

class ServerConnection;

namespace server_detail {

// Requests beyond the credits granted (see the header), and send buffers
// beyond the requests' own for error replies; each at most as many as the
// credits granted.
constexpr std::size_t kRequestSlack = 16;
constexpr std::size_t kErrorSends = 16;
// A connection starts with this many credits and doubles them, up to
// --credits, while a quarter are in use (maybe_grow()): an idle connection holds the
// buffers of a few calls, not of 128.
constexpr std::uint32_t kInitialCredits = 8;
constexpr std::size_t kNoRequest = SIZE_MAX;

enum class CtxKind : std::uint8_t { recv, send, rma };
struct Ctx {
  fabric::OpContext op;  // first: the provider's space, and what a completion points at
  CtxKind kind;
};
struct SlotCtx : Ctx {
  std::size_t slot = 0;
  std::size_t request = kNoRequest;  // send: the request whose reply it carries
};

// A request's life (ServerConnection::advance moves it on). Every state
// but `executing` belongs to the connection's event loop; `executing`
// belongs to the handler, which gives the request back through the inbox
// (or, run inline, by returning). Waits are states: for a payload buffer
// (the *_buffer states), for room in the send queue (posting, send_queued:
// a full send queue is normal under load, never an error), for RMA
// completions (pulling, pushing_*), for the handler, for the Send's
// completion.
enum class State : std::uint8_t {
  free,
  received,       // header valid; the call still in its receive buffer
  pull_buffer,    // waits for a buffer to pull the Read chunk into
  posting,        // its RDMA Reads or Writes wait for room in the send queue; then `after_post`
  pulling,        // RDMA Reads posted
  pulled,
  area_buffer,    // waits for a buffer to lend for the Write chunk's data
  ready,          // the call is whole: to the handler
  executing,      // the handler has it
  replied,        // the reply (or a drop) is back
  pushing_data,   // RDMA Writes into the Write chunk
  data_placed,    // the reply's data is where it goes: now the rest
  reply_buffer,   // waits for a buffer to copy a long reply into for the Reply chunk
  pushing_reply,  // RDMA Writes into the Reply chunk
  reply_pushed,
  send_queued,    // the reply is in its send buffer; the Send waits for room in the send queue
  sending,        // the Send posted; the request ends when it completes
};
const char* state_name(State s);

struct Request;

// The way back from a request's call to its connection: one per request, lent
// to the call (rpc::IncomingCall::channel) by a shared_ptr that shares the
// connection's ownership, so no call allocates one.
class RequestChannel final : public rpc::ReplyChannel {
 public:
  ServerConnection* conn = nullptr;
  // The request itself, not its index: workers reply while the progress
  // thread may grow requests_, and a deque's operator[] reads its map.
  Request* request = nullptr;
  void send(rpc::ReplyMessage&& reply) override;
  void drop() override;
  void close() override;
  const rpc::Peer& peer() const override;
};

// Its buffers (message, body, head) keep their room from call to call.
struct Request : Ctx {
  std::size_t index = 0;
  State state = State::free;
  rpcrdma::Header hdr;
  std::size_t recv_slot = 0, recv_len = 0, header_bytes = 0;
  bool holds_recv = false;                   // its receive buffer is not yet reposted
  std::optional<std::size_t> payload_slot;  // leased from the device's pool
  bool own_payload = false;                  // or its own small buffer
  bool leasing = false;                      // a buffer is on its way (through the inbox)
  std::size_t want = 0;                      // the size of the buffer it waits for
  std::size_t rma_left = 0;
  std::int64_t rma_since_ns = 0;             // when its RMA was posted; 0: none outstanding
  // The RMA batch `posting` posts: direction, bytes, the chunk's segments
  // (in hdr), how many operations are posted, and the state after.
  bool rma_write = false;
  std::uint32_t rma_len = 0;
  std::span<const rpcrdma::Segment> rma_segs;  // into hdr, or pull_segs
  StaticVector<rpcrdma::Segment, rpcrdma::kMaxReadSegments> pull_segs;  // the Read chunk's targets
  std::size_t rma_ops = 0, rma_posted = 0;
  State after_post = State::free;
  std::size_t sq_held = 0;                   // unsignalled Writes in the send queue until its Send completes
  bool sq_queued = false;                    // in sq_waiting_
  std::size_t send_slot = 0, send_len = 0;   // send_queued: the reply's send buffer
  std::optional<std::uint32_t> placed_at;    // the Read chunk's data stays in the payload buffer
  RequestChannel channel;
  std::vector<std::uint8_t> message;  // the call, without the transport header and any Read chunk
  std::vector<std::uint8_t> body;     // the reply's inline part; lent to the call for it (reply_buffer)
  std::vector<std::uint8_t> head;     // the reply's transport header
  rpc::ReplyMessage reply;            // from the handler
  bool dropped = false;               // the handler sends no reply
  std::uint32_t write_len = 0;        // bytes placed in the Write chunk
  std::uint32_t reply_len = 0;        // bytes placed in the Reply chunk
  // Its Writes are unsignalled and its Send follows them at once: the payload
  // buffer stays until the Send completes (release()).
  bool chained = false;
  Request* next_in_inbox = nullptr;
};

}  // namespace server_detail
using namespace server_detail;  // an internal header: rdma_server.cpp and server_connection.cpp

struct ConnectionMetrics {
  metrics::Gauge& connections;
  metrics::Gauge& granted;
  metrics::Gauge& in_use;
};
ConnectionMetrics& connection_metrics();

class ServerConnection final : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(RdmaServer& s, std::shared_ptr<rpc::Admission::Ticket> ticket, const rpc::Peer& peer)
      : server_(s), ticket_(std::move(ticket)), peer_(peer), addr_(rpc::to_v6(peer.addr)),
        max_requests_(s.options_.credits + kRequestSlack),
        payload_account_(std::max<std::size_t>(1, s.options_.payload_slots / 4)) {
    metrics_.connections.add(1);
  }
  ~ServerConnection();

  // Charges the memory budget for what a new connection holds; false: the
  // budget is spent (the acceptor refuses the connection). Before setup().
  bool admit_memory();
  // Registers the first credits' buffers, posts their receives, accepts.
  Result<void> setup(const fabric::ConnectRequest& req);
  // Thread-safe: its event loop ends it.
  void close() {
    closing_ = true;
    if (loop_) loop_->wake();
  }
  bool finished() const { return finished_; }

  // From the handler, on any thread: the request goes back to the progress
  // thread (at once when the handler ran there, else through the inbox).
  void reply(Request& r, rpc::ReplyMessage&& msg);
  void drop(Request& r);
  const rpc::Peer& peer() const { return peer_; }
  // Any thread (RdmaServer::trace): its requests' trace.
  const TraceRing<256>& trace() const { return trace_; }
  const rpc::Admission::Ticket& ticket() const { return *ticket_; }

 private:
  friend class ProgressLoop;
  // Its loop's thread: reaps one batch of completions and moves on what they
  // and the inbox bring; true if there was any. `timers_due`: also checks
  // whether the peer is gone and the RMA deadlines.
  bool turn(bool timers_due);
  bool ended() const { return closing_ || server_.stopping_; }
  bool has_inbox() const { return inbox_.load(std::memory_order_relaxed) != nullptr; }
  // A worker runs one of its calls: an inline one is answered before
  // advance() returns. Its loop's.
  bool at_worker() const { return executing_ != 0; }
  void finish();  // the loop's last act for it
  void on_recv(SlotCtx& ctx, std::size_t len);
  void on_rma_done(Request& r);
  // Moves `r` on until it waits (see State) or ends. Progress thread only.
  void advance(Request& r);
  // Every change of a request's state, recorded in trace_ by its one writer,
  // the event loop: once that has left (exited_), requests that end in
  // settle() on other threads are not recorded.
  void to(Request& r, State s) {
    if (!exited_.load(std::memory_order_relaxed)) {
      executing_ += static_cast<int>(s == State::executing) - static_cast<int>(r.state == State::executing);
      trace_.record(r.hdr.xid, static_cast<std::uint16_t>(r.index), static_cast<std::uint8_t>(s));
    }
    r.state = s;
  }
  // The steps advance() takes: each does its work and returns the state it
  // leads to, or free when the request ended there (release()).
  State take_call(Request& r);     // received: where the call's bytes go first
  State start_pull(Request& r);    // pull_buffer: the Read chunk's RDMA Reads
  State rebuild_call(Request& r);  // pulled
  State lend_area(Request& r);     // the call is whole: ready, or area_buffer first
  void dispatch(Request& r);       // executing: to the handler, which replies
  State place_reply(Request& r);   // replied
  State finish_reply(Request& r);  // data_placed
  State copy_reply(Request& r);    // reply_buffer
  // Sets up the RDMA Writes of `len` bytes of the request's payload buffer
  // into `segs` (posting); the request then waits in `waiting` for them, or
  // goes straight to `done` when the Send can follow them unwaited (chain()).
  State push(Request& r, std::uint32_t len, std::span<const rpcrdma::Segment> segs, State waiting, State done);
  bool chain(const Request& r, bool reply_chunk) const;
  bool fits_inline(const Request& r) const;  // the reply's body goes in the Send
  State send_reply(Request& r, rpcrdma::Proc proc);
  void send_error(std::uint32_t xid, rpcrdma::ErrorCode code);
  std::optional<std::size_t> take_send_slot(bool for_error);
  void on_send_done(SlotCtx& ctx);

  // The send queue, counted (as nvmet-rdma counts its send-queue slots):
  // every Send, Read and Write posted takes an entry, given back when it
  // completes (an unsignalled Write's when its request's Send does). A
  // request short of room waits in sq_waiting_, in order, and goes on when
  // completions bring room; the provider's FI_EAGAIN is the same wait.
  bool post_rma(Request& r);    // posting: true once the whole batch is posted
  bool post_reply(Request& r);  // send_queued: true once the Send is posted
  bool sq_wait(Request& r);     // false, with r queued
  bool sq_open(const Request& r) const {
    return !sq_stalled_ && sq_free_ > 0 && (sq_waiting_.empty() || resuming_ == &r);
  }
  void resume_sq_waiters();

  // Credits grow with use (kInitialCredits): more receives posted, buffers
  // registered and requests usable, charged to the memory budget first.
  void maybe_grow();
  std::size_t usable_requests() const { return granted_ + std::min<std::size_t>(kRequestSlack, granted_); }
  std::size_t error_sends() const { return std::min<std::size_t>(kErrorSends, granted_); }
  std::size_t bytes_for(std::uint32_t credits) const;  // what a connection granting `credits` holds
  void add_requests(std::size_t upto);  // up to `upto` usable, the new ones free
  void repost_recv(std::size_t slot);
  void repost_recv(Request& r);
  void check_rma_deadline();
  State release(Request& r);  // the request ends: free
  Request* take_request();
  State fail(Request& r, const char* why);   // ERR_CHUNK, and the request ends
  void broken(Request& r, const char* why);  // the connection closes; the request stays

  // The inbox: requests handed back from other threads (a worker's reply, a
  // payload buffer leased), a lock-free stack the event loop empties
  // whole. A request is in it at most once: it waits for one thing at a time.
  void post(Request& r);
  bool take_inbox();  // false: it was empty
  void settle();  // after its loop finished it: requests posted end here
  std::atomic<Request*> inbox_{nullptr};
  std::atomic<bool> exited_{false};
  static thread_local const ServerConnection* running_here_;  // the one its loop is turning
  std::shared_ptr<ProgressLoop> loop_;  // set before the first turn
  bool hot_ = false;    // its loop's: has work, turn it again
  bool armed_ = false;  // its loop's: try_wait succeeded since its last turn
  int executing_ = 0;   // its loop's: requests in State::executing (to())

  // Gives `r` a payload buffer of at least `bytes`: true when it has one;
  // false when it must wait for one, which comes through the inbox.
  bool buffer(Request& r, std::size_t bytes);
  static bool has_payload(const Request& r) { return r.own_payload || r.payload_slot; }
  std::span<std::uint8_t> payload(const Request& r);  // the buffer it holds
  void* payload_desc(const Request& r);
  // Buffers go back when the request ends or the connection dies, never twice.
  void give_back(Request& r);
  void drain();

  RdmaServer& server_;
  std::shared_ptr<rpc::Admission::Ticket> ticket_;
  std::uint32_t granted_ = 0;  // credits granted: receives posted
  std::size_t charged_ = 0;    // bytes charged to the memory budget
  std::size_t sq_free_ = 0;    // send queue entries free (see post_rma)
  bool sq_stalled_ = false;    // the provider said FI_EAGAIN: wait for a completion
  std::deque<std::size_t> sq_waiting_;  // requests waiting for room, oldest first
  const Request* resuming_ = nullptr;   // resume_sq_waiters' current one
  fabric::Domain* domain_ = nullptr;  // of the device the connection arrived on
  PayloadPool* payload_ = nullptr;    // that device's
  std::unique_ptr<fabric::Endpoint> ep_;
  bool chain_writes_ = false;  // see chain()
  rpc::Peer peer_;
  rpc::Address addr_;
  std::uint32_t peer_recv_inline_ = rpcrdma::kLegacyInline;
  std::unique_ptr<SlotPool> recv_pool_, send_pool_, own_payloads_;  // own_payloads_: one per request
  std::vector<SlotCtx> recv_ctx_, send_ctx_;
  // Made as credits grow (add_requests), up to max_requests_; a deque, so a
  // request never moves (completions and the inbox point at it).
  std::deque<Request> requests_;
  const std::size_t max_requests_;
  ConnectionMetrics& metrics_ = connection_metrics();
  std::mutex mu_;  // guards free_requests_
  std::vector<std::size_t> free_requests_;
  // Its share of the device's payload buffers: at most a quarter of them
  // (RdmaServerOptions::payload_slots), so the RMAs of one client that stalls
  // them cannot hold every buffer.
  PayloadPool::Account payload_account_;
  // Its requests' last state changes and each one's latest (xid, request,
  // state, time), kept on for a debugging session (/debug/rdma).
  TraceRing<256> trace_{max_requests_};
  std::atomic<bool> closing_{false}, finished_{false};
};

}  // namespace nfsrdma::rdma
