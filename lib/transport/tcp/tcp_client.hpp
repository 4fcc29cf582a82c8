// The client side of RPC over TCP: one connection, many calls in flight,
// replies matched to calls by xid.
//
// Theory of operation: call() registers the handler under its xid, then writes
// the record under the send mutex. Replies are read and their handlers run
// by a reader thread of the connection's own, or, with
// TcpClientOptions::caller_progress, by whoever calls progress() (the fio
// engine's getevents), on a non-blocking socket. A caller-driven call()
// that finds the socket full reads the replies that arrived meanwhile (and
// queues them for progress()), since a server that stops reading until its
// replies are taken would otherwise wait for us as we wait for it. When the
// connection fails, every pending call's handler runs with an error whose
// action is `reconnect`; the owner (client/core) decides whether to
// reconnect and retransmit.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lib/base/fifo.hpp"
#include "lib/rpc/transport.hpp"
#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {

struct TcpClientOptions {
  // A limit, not a buffer: records are read into what they need. 4 MiB of
  // data plus headers: the largest READ reply a server may offer.
  std::size_t max_record_bytes = (4u << 20) + 64 * 1024;
  bool reserved_port = true;  // bind a source port < 1024 when root
  std::string source_address;  // bind this local address first (empty: any)
  int connect_timeout_ms = 0;  // 0: the kernel's SYN retries (minutes)
  // No reader thread: the owner calls progress() (rpc::ClientTransport),
  // and reply handlers run on its thread.
  bool caller_progress = false;
};

class TcpClient final : public rpc::ClientTransport {
 public:
  static Result<std::unique_ptr<TcpClient>> connect(const std::string& host, std::uint16_t port,
                                                    TcpClientOptions options = {});
  ~TcpClient() override;

  void call(const rpc::OutgoingCall& call, rpc::ReplyHandler on_reply) override;
  void shutdown() override;
  Result<std::size_t> progress(int timeout_ms) override;
  int wait_fd() override;
  bool try_wait() override;
  void hold_sends() override;
  void send_held() override;

 private:
  TcpClient(Fd fd, TcpClientOptions options, std::string peer);
  void reader_loop();
  // The next whole record into `out`, reading what the socket has: true when
  // there is one, false when the socket has nothing more now (non-blocking),
  // an error when the connection ended. With recv_mu_ held.
  Result<bool> next_record_locked(std::vector<std::uint8_t>& out);
  // Caller-driven, while call() waits for room in the socket: waits for room
  // or replies, and queues the replies that came (for calls still pending).
  Result<void> absorb();
  // The handler of the call `reply` answers, taken from calls_; empty when
  // that call is not pending (answered, failed, or never made).
  rpc::ReplyHandler take_handler(std::span<const std::uint8_t> reply);
  void deliver(std::span<const std::uint8_t> reply);  // to the call it answers, if still pending
  // Ends every call: the ones absorb() has replies for with them, the rest with `e`.
  void fail_all(const Error& e);
  // Writes `iov` whole; on failure marks the connection broken and shuts it
  // (whoever reads next fails the calls). With send_mu_ held.
  void send_locked(iovec* iov, int count);
  void send_held_locked();  // what hold_sends() kept, in one write

  Fd fd_;
  TcpClientOptions options_;
  std::string peer_;
  std::mutex send_mu_;  // ORDER: send_mu_ before recv_mu_ before calls_mu_
  // Calls hold_sends() kept (at most kMostHeld), with their record marks;
  // their room is kept for the next. Guarded by send_mu_.
  struct Held {
    std::array<std::uint8_t, 4> mark;
    xdr::Parts message;
  };
  static constexpr std::size_t kMostHeld = 64;
  std::vector<Held> held_;
  std::vector<iovec> held_iov_;
  bool holding_ = false;
  std::mutex recv_mu_;  // guards the five below
  BufferShelf shelf_{1, 1};  // one record at a time: its room is kept for the next
  // A read brings up to 64 KiB of small replies: a server answering a batch
  // of 4 KiB READs sends them together.
  RecordReader reader_{options_.max_record_bytes, &shelf_, 64 * 1024};
  bool drained_ = false;  // caller-driven: the last read took less than there was room for
  // Replies absorb() read, each with its call's handler (taken from calls_,
  // so a second reply to it is dropped), for progress().
  struct Absorbed {
    std::vector<std::uint8_t> record;
    rpc::ReplyHandler handler;
  };
  Fifo<Absorbed> absorbed_;
  std::optional<Error> ended_;  // why the connection ended, once it has (caller-driven)
  std::mutex calls_mu_;
  std::pmr::unsynchronized_pool_resource call_nodes_;  // calls_'s, kept for the next calls
  std::pmr::unordered_map<std::uint32_t, rpc::ReplyHandler> calls_{&call_nodes_};  // guarded by calls_mu_
  bool broken_ = false;                                                           // guarded by calls_mu_
  std::atomic<bool> shutting_down_{false};
  std::thread reading_;  // the reader thread, unless caller-driven
};

}  // namespace nfsrdma::tcp
