// RAII over libfabric, one class per object (as libfabric's own tcp provider
// and fabtests are laid out): provider selection and fi_info, the domain and
// its memory regions, connected endpoints with their completion queue, and the
// passive endpoint that listens.
//
// Every memory region is registered with FI_MR_BASIC semantics (virtual
// addresses, provider-chosen keys) on every provider, so a segment on the wire
// means the same thing to a verbs peer and to a tcp one: handle = 32-bit key,
// offset = virtual address. A provider that hands out wider keys is refused.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "lib/base/result.hpp"

namespace nfsrdma::fabric {

Error fabric_error(int rc, const std::string& what);
// A post's return code `rc` as a result whose error says whose failure it
// is: the connection's (Action::reconnect), a full queue's (retry_now), or
// the request's own (fail).
Result<void> post_result(long rc, const char* what);

// Gives SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT back to their
// default action wherever a library loaded with libfabric took them; the
// first thing a program's main() does, before it installs handlers of its
// own. Debian's libfabric links its psm provider's libinfinipath, whose
// constructor hooks all six unless IPATH_NO_BACKTRACE is set: SIGINT and
// SIGTERM then call exit(1) from whichever thread gets them (static
// destructors under running threads; libfuse, which installs its handlers
// only over SIG_DFL, never unmounts), and a crash leaves a backtrace file in
// the working directory instead of a core. A signal ignored before that
// constructor ran is not known any more, and gets its default action too.
void restore_default_signals();

// "tcp", "verbs" or "sockets"; empty picks verbs when an RDMA device is
// present, else tcp.
Result<std::string> choose_provider(const std::string& requested);

class Info {
 public:
  Info() = default;
  explicit Info(fi_info* i) : info_(i) {}
  Info(Info&& o) noexcept : info_(std::exchange(o.info_, nullptr)) {}
  Info& operator=(Info&& o) noexcept {
    std::swap(info_, o.info_);
    return *this;
  }
  ~Info();
  fi_info* get() const { return info_; }
  fi_info* operator->() const { return info_; }

 private:
  fi_info* info_ = nullptr;
};

// Resolves `node`:`service` on a provider for a connected (FI_EP_MSG)
// endpoint with messages and RMA. `passive`: the address to listen on.
// `source`: a client's local IP address to connect from (empty: the route's),
// which picks the device where several carry routes to the peer.
Result<Info> get_info(const std::string& provider, const std::string& node, const std::string& service,
                      bool passive, const std::string& source = {});

// Space a provider may use in each operation's context (FI_CONTEXT/FI_CONTEXT2
// mode): operation contexts begin with one of these.
struct OpContext {
  fi_context2 provider_space;
};

class Domain;

class MemoryRegion {
 public:
  MemoryRegion() = default;
  MemoryRegion(MemoryRegion&& o) noexcept;
  MemoryRegion& operator=(MemoryRegion&& o) noexcept;
  ~MemoryRegion();

  std::uint8_t* data() const { return static_cast<std::uint8_t*>(addr_); }
  std::size_t size() const { return len_; }
  std::uint32_t key() const { return key_; }
  void* desc() const { return desc_; }
  // The segment offset a peer uses for `p` inside this region.
  std::uint64_t remote_address(const void* p) const { return reinterpret_cast<std::uintptr_t>(p); }
  bool contains(const void* p, std::size_t n) const;

 private:
  friend class Domain;
  fid_mr* mr_ = nullptr;
  void* addr_ = nullptr;
  std::size_t len_ = 0;
  std::uint32_t key_ = 0;
  void* desc_ = nullptr;
  bool remote_ = false;  // peers may RDMA Read/Write it
};

class Domain {
 public:
  static Result<std::unique_ptr<Domain>> open(const fi_info* info);
  ~Domain();

  // Registers caller memory. `remote_access`: the peer may RDMA Read/Write it.
  Result<MemoryRegion> register_memory(void* addr, std::size_t len, bool remote_access);

  fid_fabric* fabric() const { return fabric_; }
  fid_domain* get() const { return domain_; }
  const fi_info* info() const { return info_.get(); }

 private:
  Domain() = default;
  Info info_;  // our copy, with the mr_mode we asked for
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
};

struct Completion {
  void* context = nullptr;  // the OpContext* given when posting
  std::uint64_t flags = 0;  // FI_SEND, FI_RECV, FI_READ, FI_WRITE...
  std::size_t len = 0;      // bytes received (FI_RECV)
  int error = 0;            // 0, or a positive fabric errno
};

// A connected endpoint with one completion queue for sends, receives and RMA,
// and an event queue for connection management.
class Endpoint {
 public:
  // Runs once the endpoint exists, before the connection is made: receives
  // must be posted there, since the peer may send as soon as it is connected.
  using Prepare = std::function<Result<void>(Endpoint&)>;

  // Client side: connects to `info`'s destination, sending `private_data`;
  // the server's private data comes back in `peer_private`. `wait_fd`: with
  // a descriptor to wait on (wait_fd() below).
  static Result<std::unique_ptr<Endpoint>> connect(Domain& domain, const fi_info* info,
                                                   std::span<const std::uint8_t> private_data,
                                                   std::vector<std::uint8_t>& peer_private, int timeout_ms,
                                                   std::size_t queue_depth, bool wait_fd, const Prepare& before_connect);
  // Server side, from a connection request.
  static Result<std::unique_ptr<Endpoint>> accept(Domain& domain, const fi_info* request,
                                                  std::span<const std::uint8_t> private_data, int timeout_ms,
                                                  std::size_t queue_depth, const Prepare& before_accept);
  ~Endpoint();

  Result<void> post_recv(OpContext* ctx, void* buf, std::size_t len, void* desc);
  // An unsignalled Send or Write (`signalled` false) completes only if it
  // fails; a signalled operation posted after it completes after it, so its
  // completion says the earlier one's buffer is free again.
  Result<void> post_send(OpContext* ctx, const void* buf, std::size_t len, void* desc, bool signalled = true);
  // One RMA each; the caller keeps `len` within max_rma_bytes().
  Result<void> post_read(OpContext* ctx, void* local, std::size_t len, void* desc, std::uint64_t remote_addr,
                         std::uint32_t key);
  Result<void> post_write(OpContext* ctx, const void* local, std::size_t len, void* desc,
                          std::uint64_t remote_addr, std::uint32_t key, bool signalled = true);
  // True when a Send posted after RDMA Writes reaches the peer after their
  // data is placed (FI_ORDER_SAW; RC queue pairs and the tcp provider): the
  // Send need not wait for the Writes' completions.
  bool orders_send_after_write() const { return send_after_write_; }

  // Reaps up to out.size() completions, waiting up to `timeout_ms` (0: don't
  // wait) for the first. Returns how many, or an error if the queue broke.
  Result<std::size_t> poll(std::span<Completion> out, int timeout_ms);
  // True once the peer has disconnected (checked without blocking).
  bool peer_gone();
  void shutdown();
  // Wakes a thread blocked in poll() (thread-safe).
  void wake();
  // For a thread that waits on many endpoints at once (rdma::ProgressLoop,
  // NfsClient::wait_any; accepted endpoints, and connected ones asked for
  // it, else -1): a descriptor that becomes readable when the completion
  // queue may have work, and the check to make before waiting on it.
  // try_wait() is false when there is work now (poll() instead); true means
  // the queue is armed, so the descriptor will signal what comes next
  // (fi_trywait). Not thread-safe: the thread that polls calls them.
  int wait_fd() const { return wait_fd_; }
  bool try_wait();

  std::size_t max_rma_bytes() const { return max_msg_; }
  // Work requests the send queue holds (tx_attr->size): Sends, Reads and
  // Writes posted and not yet completed, an unsignalled Write until a
  // signalled operation after it completes.
  std::size_t send_queue_size() const { return send_queue_; }
  // The peer's address (fi_getpeer), for access control above.
  bool peer_address(sockaddr_storage& out, socklen_t& len) const;

 private:
  explicit Endpoint(Domain& d) : domain_(d) {}
  Result<void> open(const fi_info* info, std::size_t queue_depth, bool wait_fd);

  Domain& domain_;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_eq* eq_ = nullptr;
  std::size_t max_msg_ = 0;
  std::size_t send_queue_ = 0;
  bool send_after_write_ = false;
  // iWARP: a Send or Write posted while an RDMA Read is out carries
  // FI_FENCE, so it goes (and completes) only after the Read. siw completes
  // a Send as soon as it is sent, ahead of an earlier Read still waiting for
  // its response; libfabric 1.17's verbs provider takes send completions to
  // come in posting order and, when they do not, frees the wrong request
  // and crashes later. RoCE and InfiniBand complete in order.
  bool fence_after_read_ = false;
  std::atomic<std::size_t> reads_out_{0};
  std::uint64_t fence() const;
  void read_done(std::uint64_t flags) {
    if (fence_after_read_ && (flags & FI_RMA) && (flags & FI_READ)) reads_out_.fetch_sub(1, std::memory_order_relaxed);
  }
  int wait_fd_ = -1;
  std::string peer_;
  bool gone_ = false;
};

// A connection request waiting for accept or reject.
struct ConnectRequest {
  Info info;
  std::vector<std::uint8_t> private_data;
  // The requester's address, when the provider gives it as a socket address.
  bool peer_address(sockaddr_storage& out, socklen_t& len) const;
};

// Listens on every device that has `host` (all of them when empty). A request
// arrives on one device; domain_for() opens that device's domain the first
// time (a verbs domain is a device: memory registered in one cannot be used
// by a connection on another), and keeps it for the listener's life.
class Listener {
 public:
  static Result<std::unique_ptr<Listener>> listen(const std::string& provider, const std::string& host,
                                                  std::uint16_t port);
  ~Listener();

  std::uint16_t port() const;
  // The domain of the device `req` arrived on. Not thread-safe: the thread
  // that waits for requests calls it.
  Result<Domain*> domain_for(const ConnectRequest& req);
  // Waits up to `timeout_ms` for a connection request; an empty result on timeout.
  Result<std::optional<ConnectRequest>> wait_request(int timeout_ms);
  void reject(const ConnectRequest& req);
  // Wakes a thread blocked in wait_request() (thread-safe).
  void wake();

 private:
  Listener() = default;
  Info info_;
  fid_fabric* fabric_ = nullptr;
  fid_eq* eq_ = nullptr;
  fid_pep* pep_ = nullptr;
  std::map<std::string, std::unique_ptr<Domain>> domains_;  // by domain (device) name
};

}  // namespace nfsrdma::fabric
