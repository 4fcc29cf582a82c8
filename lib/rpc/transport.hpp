// The Transport interface (DESIGN.md): what the NFS code above sees of a
// connection, whichever of the two implementations (tcp, rdma) carries it.
//
// A message is split where RPC-over-RDMA splits it (xdr::Parts): its one
// DDP-eligible data item (WRITE data in a call, READ data in a reply, RFC 8267
// §2) is its `payload`. TCP sends it inline; RDMA moves it by RDMA Read/Write.
// Nothing above this line knows which.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/base/pipe_pool.hpp"
#include "lib/base/result.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpc {

// ---- client side ----

struct OutgoingCall {
  std::uint32_t xid = 0;
  // The whole call (header and arguments), XDR-encoded.
  xdr::Parts message;
  // The largest reply (`reply_max_bytes`) and the largest DDP-eligible item in
  // it (`reply_payload_max`: READ count, READLINK path), so RDMA can offer a
  // Write chunk or a Reply chunk of the right size. 0: small, inline.
  std::uint32_t reply_max_bytes = 0;
  std::uint32_t reply_payload_max = 0;
  // Where the caller wants the reply's DDP-eligible data. A transport that can
  // place it there directly (RDMA into registered memory) does, and hands the
  // reply over split: its payload is what was placed there. A reply may come
  // split with its payload elsewhere too (RDMA, a bounce buffer), or whole:
  // the payload's address says which.
  std::span<std::uint8_t> reply_payload;
};

// Runs once per call with the reply (valid only during the callback) or the
// error that ended the call.
using ReplyHandler = std::function<void(Result<xdr::Parts>)>;

class ClientTransport {
 public:
  virtual ~ClientTransport() = default;
  // Sends a call. `on_reply` runs exactly once, maybe on the transport's own
  // thread, before or after call() returns. The bytes `call`'s spans view
  // stay the caller's, unchanged, until both call() has returned and
  // `on_reply` has run: a transport may send them later (RPC-RDMA, a call
  // waiting for credits) rather than copy them, and may still be sending
  // them when a broken connection fails the call.
  virtual void call(const OutgoingCall& call, ReplyHandler on_reply) = 0;
  // Fails every call still pending and stops; no callback runs after it
  // returns, but one a caller-driven progress() on another thread had
  // already taken.
  virtual void shutdown() = 0;
  // For a transport made without a thread of its own (caller-driven
  // progress): reaps completions, running their reply handlers on the calling
  // thread, waiting up to `timeout_ms` for the first. Returns how many, or the
  // error that broke the connection (its calls have failed by then).
  // Transports with their own thread have nothing to do here and return 0.
  virtual Result<std::size_t> progress(int timeout_ms) {
    (void)timeout_ms;
    return std::size_t{0};
  }
  // For a caller driving several such transports at once (nconnect), which
  // waits on all of them together: a descriptor that becomes readable when
  // progress() may find work (-1: none; the caller then looks again after
  // a short wait on the others), and the look to take just before waiting
  // on it, after a progress(): false when work is already there, so
  // progress() again.
  virtual int wait_fd() { return -1; }
  virtual bool try_wait() { return true; }
  // Calls made from now until send_held() may wait in the transport and
  // leave together, so a caller with several to make at once (the fio
  // engine's commit) pays the wire's cost per send once: a caller-driven
  // TCP transport writes them with one sendmsg, and its progress() sends
  // what is held first. One with threads of its own (calls from many
  // threads), and RDMA (one post per message, the provider offering no
  // batch), send at once and ignore these.
  virtual void hold_sends() {}
  virtual void send_held() {}
  // Registers caller memory once (e.g. fio's I/O buffers) so payloads and
  // reply data inside it move without copies. Payloads there must stay
  // unchanged until their reply. Transports with nothing to register accept it.
  virtual Result<void> register_memory(std::span<std::uint8_t> region) {
    (void)region;
    return {};
  }
};

// ---- server side ----

struct Peer {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string describe() const;
};

// An address as 16 bytes: IPv4 becomes IPv4-mapped IPv6, so one comparison
// serves both; anything else is all zeros.
std::array<std::uint8_t, 16> to_v6(const sockaddr_storage& addr);
// The socket address (port 0) of 16 bytes to_v6 made: IPv4-mapped ones as IPv4.
sockaddr_storage from_v6(const std::array<std::uint8_t, 16>& a);
// 127.0.0.0/8 or ::1: a process on this host (what rpcbind and statd trust).
bool is_loopback(const sockaddr_storage& addr);

// A reply the transport sends: whole in `bytes`, or split (xdr::Parts) when
// its DDP-eligible item went into room the transport lent for it. NFSv3's
// such items end their replies (READ data, READLINK's path), so a split
// reply has no tail: `bytes` is its head, up to the item's length word.
struct ReplyMessage {
  std::vector<std::uint8_t> bytes;  // XDR-encoded (see IncomingCall::reply_buffer)
  // The item apart: in registered memory the transport lent
  // (IncomingCall::reply_area: RDMA sends it by RDMA Write from there), or
  // in a pipe it lent (IncomingCall::pipes: TCP splices file data in and out
  // into the socket, uncopied). Neither: the reply is whole.
  std::span<const std::uint8_t> payload;
  PipePool::Pipe pipe;

  // The reply made whole again, nothing apart (an error replacing it).
  void unsplit() {
    payload = {};
    pipe = {};
  }
};

// The way back to the client that sent a call. Every call handed to a
// CallHandler ends in exactly one send() or drop(); transports count calls in
// flight per connection by it and stop reading from a connection at its limit.
// Sending after the connection closed is a no-op.
class ReplyChannel {
 public:
  virtual ~ReplyChannel() = default;
  virtual void send(ReplyMessage&& reply) = 0;
  // The call gets no reply (e.g. a retransmission of a call still executing).
  virtual void drop() = 0;
  virtual void close() = 0;
  virtual const Peer& peer() const = 0;
};

struct IncomingCall {
  // The whole call, XDR-encoded, in the transport's memory: valid until the
  // reply is sent or the call dropped. Split when its payload came apart (an
  // RPC-over-RDMA Read chunk, so WRITE data is not copied).
  xdr::Parts message;
  std::shared_ptr<ReplyChannel> channel;
  int listener = 0;  // the tag of the listener the call arrived on
  // From a reserved source port (TCP), or over RDMA, which has no ports to
  // check (Linux nfsd counts every RDMA connection as secure too).
  bool secure = false;
  bool rdma = false;  // arrived over RPC-over-RDMA
  // Registered memory lent for the reply's DDP-eligible item (RDMA, when the
  // client offered a Write chunk): filling it saves the copies. Empty when
  // the transport has none to lend.
  std::span<std::uint8_t> reply_area;
  // See ReplyMessage::pipe; null when the transport sends no pipes.
  PipePool* pipes = nullptr;
  // An empty buffer with room in it, for ReplyMessage::bytes: a transport that
  // keeps its buffers from call to call (RDMA, per request) lends one here and
  // gets it back with the reply, so a call in the steady state allocates none.
  std::vector<std::uint8_t> reply_buffer;
};

using CallHandler = std::function<void(IncomingCall&&)>;

}  // namespace nfsrdma::rpc
