// The client side of RPC-over-RDMA v1 (RFC 8166): one connection, calls in
// flight up to the server's credit grant, chunks chosen by plan_call() and
// marshaled by marshal_call(), replies read by read_reply().
//
// Theory of operation: call() issues a call at once, straight from the
// caller's buffers, when a credit and the bounce buffers its plan needs are
// free; otherwise the call waits in order in `queued_` as it came, its bytes
// still the caller's (which keeps them until the reply handler runs:
// rpc::ClientTransport::call), so a call waiting for credits is neither
// copied nor allocates. Credits start at 1 after connect,
// follow each reply's grant (0 counts as 1) and never exceed our maximum. The
// progress thread reaps completions: a reply releases its buffers, is handed
// to the caller's handler where it landed (or rebuilt into a plain RPC reply
// when data came through a bounce buffer: Write chunk data put back at the
// end of the inline part, where NFSv3's DDP-eligible results sit; or the
// whole reply from the Reply chunk), and only then, its receive posted again,
// gives back its credit. Sends are signalled one in kSendBatch, as
// xprtrdma's are: on the tcp provider each Send's completion would wake the
// progress thread a second time per call; a signalled one, completing after
// every Send before it, frees their buffers too. RDMA_ERROR turns
// into a clear error for that call. Memory the server may touch is only this
// connection's bounce buffers, registered once in a domain of our own.
// Completions are reaped by a thread of the client's own, or, with
// RdmaClientOptions::caller_progress, by whoever calls progress().
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory_resource>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "lib/base/fifo.hpp"
#include "lib/rpc/transport.hpp"
#include "lib/rpcrdma/marshal.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "lib/transport/rdma/buffers.hpp"

namespace nfsrdma::rdma {

// One Send in this many asks for a completion, and the one taking the send
// pool's last free buffer, whose completion frees them all. The pool has this
// many buffers beyond the credits, so calls within them seldom wait for one.
inline constexpr std::uint32_t kSendBatch = 16;

struct RdmaClientOptions {
  std::string provider;              // empty: verbs if present, else tcp
  std::uint32_t max_credits = 128;   // never more calls in flight than this
  std::uint32_t inline_bytes = rpcrdma::kDefaultInline;
  std::size_t bounce_slots = 48;
  std::size_t bounce_bytes = (1u << 20) + 64 * 1024;
  int connect_timeout_ms = 5000;
  std::string source_address;  // the local IP address to connect from (empty: the route's)
  // No progress thread: the owner calls progress() (rpc::ClientTransport),
  // and reply handlers run on its thread (the fio engine's getevents).
  bool caller_progress = false;
  // With caller_progress, for a caller waiting on several connections at
  // once: wait_fd() and try_wait() (the completion queue's descriptor; on
  // the tcp provider an epoll set, 0.4 more syscalls a call than the
  // provider's own wait, so only when asked).
  bool wait_fd = false;
};

class RdmaClient final : public rpc::ClientTransport {
 public:
  static Result<std::unique_ptr<RdmaClient>> connect(const std::string& host, std::uint16_t port,
                                                     RdmaClientOptions options = {});
  ~RdmaClient() override;

  void call(const rpc::OutgoingCall& call, rpc::ReplyHandler on_reply) override;
  void shutdown() override;
  Result<void> register_memory(std::span<std::uint8_t> region) override;
  Result<std::size_t> progress(int timeout_ms) override;
  int wait_fd() override;
  bool try_wait() override;

  std::uint32_t credits();                // the current grant
  std::uint32_t max_in_flight_seen();     // the most calls ever outstanding at once
  std::uint32_t peer_inline_receive() const { return peer_recv_inline_; }
  std::uint64_t bounce_bytes();           // payload bytes copied through bounce buffers
  const std::string& provider() const { return provider_; }

 private:
  // Caller memory registered with register_memory().
  struct CallerRegion {
    std::span<std::uint8_t> span;
    fabric::MemoryRegion mr;
  };
  struct Call {
    std::uint32_t xid = 0;
    xdr::Parts message;
    bool payload_registered = false;       // in a CallerRegion: a Read chunk can point there
    std::span<std::uint8_t> direct_reply;  // in a CallerRegion: the Write chunk points there
    std::uint32_t reply_max = 0, reply_payload_max = 0;
  };
  // A call waiting for a credit or buffers: its message is the caller's.
  struct Job {
    Call call;
    rpc::ReplyHandler handler;
  };
  enum class Issue { sent, failed, wait };
  struct Pending {
    rpc::ReplyHandler handler;
    std::optional<std::size_t> read_slot, write_slot, reply_slot;
    std::span<const std::uint8_t> reply_placed;  // the caller's memory the Write chunk points at
    rpcrdma::Offers offered;    // a reply claiming more is refused
  };
  struct SlotCtx {
    fabric::OpContext op;
    bool recv;
    std::size_t slot;
  };

  RdmaClient() = default;
  // Issues queued jobs while credits and buffers allow. Called with mu_ held;
  // returns handlers to run (failed jobs) after the lock is dropped.
  void pump_locked(std::vector<std::pair<rpc::ReplyHandler, Error>>& failed);
  // Moves `handler` into the pending call, or into `failed`; not if it must wait.
  Issue issue_locked(const Call& call, rpc::ReplyHandler& handler,
                     std::vector<std::pair<rpc::ReplyHandler, Error>>& failed);
  void progress_loop();
  // Reaps and handles one batch of completions; an error once the connection
  // broke (every call failed by then).
  Result<std::size_t> step(int timeout_ms);
  // Whether an empty step() reads the connection manager's events now.
  bool cm_look_due(int timeout_ms);
  void on_reply(std::size_t slot, std::size_t len);
  // What a reply means for its call: its handler, taken from pending_ (none
  // for an unknown xid), and the reply to give it (in `bytes`, split when its
  // data came in a Write chunk, or whole in a bounce buffer from a Reply
  // chunk) or the error. Its buffers go back but the one the reply views,
  // and the grant is taken. With mu_ held.
  struct Settled {
    bool found = false;  // it answers a call in flight, whose credit comes back
    rpc::ReplyHandler handler;
    Result<xdr::Parts> outcome = Error{};
    std::optional<std::size_t> held;  // a bounce buffer of `outcome`'s, given back once the handler ran
  };
  Settled settle_locked(const rpcrdma::Decoded& d, std::span<const std::uint8_t> bytes);
  void fail_all(const Error& e);
  void release_locked(Pending& p);
  // Gives back the send buffers of every Send posted up to `slot`'s, whose
  // signalled completion came. With mu_ held.
  void retire_sends_locked(std::size_t slot);
  const CallerRegion* region_of(const void* p, std::size_t n);  // with mu_ held

  std::string provider_, peer_;
  RdmaClientOptions options_;
  std::unique_ptr<fabric::Domain> domain_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::unique_ptr<SlotPool> recv_pool_, send_pool_, bounce_;
  std::vector<SlotCtx> recv_ctx_, send_ctx_;
  std::uint32_t peer_recv_inline_ = rpcrdma::kLegacyInline;  // what it receives inline
  std::uint32_t peer_send_inline_ = rpcrdma::kLegacyInline;  // what it may send us inline

  std::mutex mu_;  // guards everything below
  std::uint32_t credits_ = 1;
  std::uint32_t in_flight_ = 0, max_in_flight_ = 0;
  std::uint64_t bounce_bytes_ = 0;
  std::vector<std::unique_ptr<CallerRegion>> regions_;
  Fifo<Job> queued_;
  std::pmr::unsynchronized_pool_resource pending_nodes_;  // pending_'s, kept for the next calls
  std::pmr::unordered_map<std::uint32_t, Pending> pending_{&pending_nodes_};
  std::vector<std::uint8_t> head_;  // a transport header being encoded
  // The send buffers of the Sends posted and not yet known complete, in
  // posting order (a ring over send_pool_'s count), and how many Sends went
  // unsignalled since the last signalled one.
  std::vector<std::size_t> sends_;
  std::size_t sends_head_ = 0, sends_count_ = 0;
  std::uint32_t unsignalled_ = 0;
  bool broken_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> last_cm_look_ns_{0};  // steady_ns() of the last peer_gone() look
  std::thread progress_;
};

}  // namespace nfsrdma::rdma
