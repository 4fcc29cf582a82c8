#include "lib/fabric/fabric.hpp"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/resource.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "lib/base/metrics.hpp"

namespace nfsrdma::fabric {
namespace {

constexpr std::uint32_t kApiVersion = FI_VERSION(1, 10);
// FI_MR_BASIC semantics, asked of every provider (see fabric.hpp).
constexpr std::uint64_t kMrMode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr std::size_t kCmEntryBytes = sizeof(fi_eq_cm_entry) + 256;
constexpr std::size_t kQueueDepth = 1024;

// Reads one connection-management event; the private data follows the entry.
struct CmEvent {
  std::uint32_t event = 0;
  alignas(fi_eq_cm_entry) std::uint8_t buf[kCmEntryBytes];
  std::size_t len = 0;
  fi_eq_cm_entry* entry() { return reinterpret_cast<fi_eq_cm_entry*>(buf); }
  std::span<const std::uint8_t> data() const {
    return len > sizeof(fi_eq_cm_entry) ? std::span(buf + sizeof(fi_eq_cm_entry), len - sizeof(fi_eq_cm_entry))
                                        : std::span<const std::uint8_t>{};
  }
};

// What to do when the device refused to pin memory: the locked-memory limit
// is the usual cause (siw counts against it even for root; other drivers
// for users without CAP_IPC_LOCK).
std::string locked_memory_hint() {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return {};
  return " (the locked-memory limit is " + std::to_string(lim.rlim_cur >> 10) +
         " KiB: raise it with `ulimit -l unlimited`, LimitMEMLOCK=infinity in a systemd unit, or memlock in "
         "/etc/security/limits.conf)";
}

// Returns nullopt on timeout.
Result<std::optional<CmEvent>> read_cm_event(fid_eq* eq, int timeout_ms, const std::string& what) {
  CmEvent ev;
  ssize_t n = fi_eq_sread(eq, &ev.event, ev.buf, sizeof ev.buf, timeout_ms, 0);
  if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) return std::optional<CmEvent>{};
  if (n == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    fi_eq_readerr(eq, &err, 0);
    Error e = fabric_error(-err.err, what);
    if (err.err == ECONNREFUSED || err.err == ETIMEDOUT || err.err == EHOSTUNREACH) e.action = Action::retry_later;
    return e;
  }
  if (n < 0) return fabric_error(static_cast<int>(n), what);
  ev.len = static_cast<std::size_t>(n);
  return std::optional<CmEvent>{ev};
}

void close_fid(fid* f) {
  if (f) fi_close(f);
}

}  // namespace

Error fabric_error(int rc, const std::string& what) {
  int code = rc < 0 ? -rc : rc;
  return Error{ErrorDomain::fabric, code, Action::fail, what + ": " + fi_strerror(code)};
}

// A post refused for the connection's state (siw refuses a Send with
// ENOTCONN while its connection closes; a provider may say the endpoint's
// state forbids it) is the connection's failure: the call goes again on a
// new one, as xprtrdma drops the connection when a post fails. Anything
// else (EINVAL: a request the device cannot take) is the call's own, and
// would fail again wherever it went.
Result<void> post_result(long rc, const char* what) {
  if (rc == 0) return {};
  Error e = fabric_error(static_cast<int>(rc), what);
  switch (-rc) {
    case FI_EAGAIN:
      e.action = Action::retry_now;
      break;
    case FI_ENOTCONN:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case EPIPE:
    case FI_ESHUTDOWN:
    case FI_EOPBADSTATE:
      e.action = Action::reconnect;
      break;
    default:
      break;
  }
  return e;
}

void restore_default_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL, SIGABRT}) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN) {
      ::signal(sig, SIG_DFL);
    }
  }
}

Info::~Info() {
  if (info_) fi_freeinfo(info_);
}

namespace {
// A numeric local address as the hints' source, which fi_freeinfo frees.
Result<void> set_source(fi_info* hints, const std::string& source) {
  sockaddr_storage ss{};
  std::size_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, source.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof *v4;
    hints->addr_format = FI_SOCKADDR_IN;
  } else if (::inet_pton(AF_INET6, source.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    len = sizeof *v6;
    hints->addr_format = FI_SOCKADDR_IN6;
  } else {
    return Error{ErrorDomain::config, EINVAL, Action::fail, "local address '" + source + "' is not an IP address"};
  }
  hints->src_addr = std::malloc(len);
  std::memcpy(hints->src_addr, &ss, len);
  hints->src_addrlen = len;
  return {};
}

Result<Info> get_info_sized(const std::string& provider, const std::string& node, const std::string& service,
                            bool passive, std::size_t queue_depth, std::uint64_t msg_order, const std::string& source) {
  Info hints(fi_allocinfo());
  if (!source.empty()) {
    if (auto r = set_source(hints.get(), source); !r) return r.error();
  }
  hints->tx_attr->size = queue_depth;
  hints->tx_attr->msg_order = msg_order;
  hints->rx_attr->size = queue_depth;
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG | FI_RMA;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = static_cast<int>(kMrMode);
  // A listener's connections are each used by one thread at a time (the
  // acceptor until it hands one to a progress loop, then that loop alone),
  // their endpoint and completion queue together: FI_THREAD_COMPLETION,
  // under which the provider leaves out the queues' locks. A client's queue
  // is posted to by callers while its progress thread reads it.
  hints->domain_attr->threading = passive ? FI_THREAD_COMPLETION : FI_THREAD_SAFE;
  hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  fi_info* out = nullptr;
  int rc = fi_getinfo(kApiVersion, node.empty() ? nullptr : node.c_str(), service.empty() ? nullptr : service.c_str(),
                      passive ? FI_SOURCE : 0, hints.get(), &out);
  if (rc != 0) {
    Error e = fabric_error(rc, "libfabric provider '" + provider + "' for " + (node.empty() ? "*" : node) + ":" +
                                   service + (source.empty() ? "" : " from " + source));
    if (rc == -FI_ENODATA) e.message = "libfabric provider '" + provider + "' is not available here" +
                                       (node.empty() ? std::string() : " for " + node) +
                                       (source.empty() ? std::string() : " from " + source);
    return e;
  }
  return Info(out);
}
}  // namespace

Result<Info> get_info(const std::string& provider, const std::string& node, const std::string& service,
                      bool passive, const std::string& source) {
  // Queues deep enough for 1024 credits' receives and their replies' Sends
  // and RMA, where the device allows; else the provider's defaults (verbs
  // gives 384 unless asked, and refuses more than the device has). Sends
  // ordered after RDMA Writes where the provider has it (verbs, tcp), so a
  // reply can be posted right behind its data (Endpoint::orders_send_after_write).
  for (std::uint64_t order : {std::uint64_t{FI_ORDER_SAW}, std::uint64_t{0}}) {
    auto r = get_info_sized(provider, node, service, passive, kQueueDepth, order, source);
    if (!r && r.error().code == FI_ENODATA) r = get_info_sized(provider, node, service, passive, 0, order, source);
    if (r || r.error().code != FI_ENODATA || order == 0) return r;
  }
  return Error{ErrorDomain::fabric, FI_ENODATA, Action::fail, "unreachable"};
}

Result<std::string> choose_provider(const std::string& requested) {
  if (!requested.empty()) {
    if (requested != "tcp" && requested != "verbs" && requested != "sockets") {
      return Error{ErrorDomain::config, 0, Action::fail,
                   "unknown libfabric provider '" + requested + "' (use tcp, verbs or sockets)"};
    }
    return requested;
  }
  if (get_info("verbs", "", "", false)) return std::string("verbs");
  return std::string("tcp");
}

MemoryRegion::MemoryRegion(MemoryRegion&& o) noexcept { *this = std::move(o); }

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  std::swap(mr_, o.mr_);
  std::swap(addr_, o.addr_);
  std::swap(len_, o.len_);
  std::swap(key_, o.key_);
  std::swap(desc_, o.desc_);
  std::swap(remote_, o.remote_);
  return *this;
}

namespace {
// Every registration goes through Domain::register_memory: what a process
// exposes to peers (remote) and what only it uses (local), in bytes.
metrics::Gauge& registered_bytes(bool remote) {
  static metrics::Gauge& r = metrics::registry().gauge(
      "nfsrdma_rdma_registered_bytes", "Memory registered with libfabric, by who may access it", {{"access", "remote"}});
  static metrics::Gauge& l = metrics::registry().gauge(
      "nfsrdma_rdma_registered_bytes", "Memory registered with libfabric, by who may access it", {{"access", "local"}});
  return remote ? r : l;
}
}  // namespace

MemoryRegion::~MemoryRegion() {
  if (mr_) {
    fi_close(&mr_->fid);
    registered_bytes(remote_).add(-static_cast<std::int64_t>(len_));
  }
}

bool MemoryRegion::contains(const void* p, std::size_t n) const {
  auto a = reinterpret_cast<std::uintptr_t>(p), base = reinterpret_cast<std::uintptr_t>(addr_);
  return a >= base && n <= len_ && a - base <= len_ - n;
}

Result<std::unique_ptr<Domain>> Domain::open(const fi_info* info) {
  std::unique_ptr<Domain> d(new Domain);
  d->info_ = Info(fi_dupinfo(info));
  // Providers that do not require these bits (tcp, sockets) honour them when
  // the domain is opened with them: keys from the provider, virtual addresses.
  d->info_->domain_attr->mr_mode = static_cast<int>(kMrMode);
  if (int rc = fi_fabric(d->info_->fabric_attr, &d->fabric_, nullptr); rc != 0) {
    return fabric_error(rc, "fi_fabric");
  }
  if (int rc = fi_domain(d->fabric_, d->info_.get(), &d->domain_, nullptr); rc != 0) {
    return fabric_error(rc, "fi_domain");
  }
  return d;
}

Domain::~Domain() {
  close_fid(domain_ ? &domain_->fid : nullptr);
  close_fid(fabric_ ? &fabric_->fid : nullptr);
}

Result<MemoryRegion> Domain::register_memory(void* addr, std::size_t len, bool remote_access) {
  std::uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
  if (remote_access) access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
  MemoryRegion m;
  if (int rc = fi_mr_reg(domain_, addr, len, access, 0, 0, 0, &m.mr_, nullptr); rc != 0) {
    Error e = fabric_error(rc, "fi_mr_reg of " + std::to_string(len) + " bytes");
    if (rc == -FI_ENOMEM) e.message += locked_memory_hint();
    return e;
  }
  std::uint64_t key = fi_mr_key(m.mr_);
  if (key > 0xffffffffULL) {
    return Error{ErrorDomain::fabric, 0, Action::fail,
                 std::string("libfabric provider '") + info_->fabric_attr->prov_name +
                     "' gives memory keys wider than 32 bits; RPC-over-RDMA segments carry 32-bit handles"};
  }
  m.addr_ = addr;
  m.len_ = len;
  m.key_ = static_cast<std::uint32_t>(key);
  m.desc_ = fi_mr_desc(m.mr_);
  m.remote_ = remote_access;
  registered_bytes(remote_access).add(static_cast<std::int64_t>(len));
  return m;
}

Result<void> Endpoint::open(const fi_info* info, std::size_t queue_depth, bool wait_fd) {
  fi_cq_attr cq_attr{};
  // One queue takes every completion: room for a full send and receive
  // queue, so it never overruns (verbs also reserves the receive queue's
  // share of it at bind, and refuses Sends past the rest).
  cq_attr.size = std::max(queue_depth * 4, info->tx_attr->size + info->rx_attr->size);
  cq_attr.format = FI_CQ_FORMAT_MSG;
  // With wait_fd, a descriptor to wait on: the completion channel's on
  // verbs, an epoll set of the connection's socket on tcp. Without, the
  // provider's choice for fi_cq_sread (on tcp, poll(2) over a descriptor
  // array: 0.4 fewer syscalls per call to a client than FI_WAIT_FD's epoll).
  cq_attr.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_UNSPEC;
  fi_eq_attr eq_attr{};
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  if (int rc = fi_endpoint(domain_.get(), const_cast<fi_info*>(info), &ep_, nullptr); rc != 0) {
    return fabric_error(rc, "fi_endpoint");
  }
  if (int rc = fi_eq_open(domain_.fabric(), &eq_attr, &eq_, nullptr); rc != 0) return fabric_error(rc, "fi_eq_open");
  if (int rc = fi_ep_bind(ep_, &eq_->fid, 0); rc != 0) return fabric_error(rc, "fi_ep_bind(eq)");
  if (int rc = fi_cq_open(domain_.get(), &cq_attr, &cq_, nullptr); rc != 0) return fabric_error(rc, "fi_cq_open");
  // Transmits complete only when posted with FI_COMPLETION (every one but an
  // unsignalled Send or Write; see post_send).
  if (int rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION); rc != 0) {
    return fabric_error(rc, "fi_ep_bind(cq, transmit)");
  }
  if (int rc = fi_ep_bind(ep_, &cq_->fid, FI_RECV); rc != 0) return fabric_error(rc, "fi_ep_bind(cq, receive)");
  if (wait_fd) {
    if (int rc = fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_); rc != 0) return fabric_error(rc, "fi_control(FI_GETWAIT)");
  }
  if (int rc = fi_enable(ep_); rc != 0) return fabric_error(rc, "fi_enable");
  max_msg_ = info->ep_attr->max_msg_size;
  send_queue_ = info->tx_attr->size;
  send_after_write_ = (info->tx_attr->msg_order & FI_ORDER_SAW) != 0;
  fence_after_read_ = info->ep_attr->protocol == FI_PROTO_IWARP;
  if (info->dest_addr && info->dest_addrlen >= sizeof(sockaddr_in)) {
    char host[INET6_ADDRSTRLEN] = "?";
    const auto* sa = static_cast<const sockaddr*>(info->dest_addr);
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
      const auto* a = static_cast<const sockaddr_in*>(info->dest_addr);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    }
    peer_ = std::string(host) + ":" + std::to_string(port);
  }
  return {};
}

Result<std::unique_ptr<Endpoint>> Endpoint::connect(Domain& domain, const fi_info* info,
                                                    std::span<const std::uint8_t> private_data,
                                                    std::vector<std::uint8_t>& peer_private, int timeout_ms,
                                                    std::size_t queue_depth, bool wait_fd, const Prepare& before_connect) {
  std::unique_ptr<Endpoint> ep(new Endpoint(domain));
  if (auto r = ep->open(info, queue_depth, wait_fd); !r) return r.error();
  if (auto r = before_connect(*ep); !r) return r.error();
  if (int rc = fi_connect(ep->ep_, info->dest_addr, private_data.data(), private_data.size()); rc != 0) {
    return fabric_error(rc, "fi_connect");
  }
  auto ev = read_cm_event(ep->eq_, timeout_ms, "connect to " + ep->peer_);
  if (!ev) return ev.error();
  if (!*ev) return Error{ErrorDomain::fabric, ETIMEDOUT, Action::retry_later, "connect to " + ep->peer_ + ": timed out"};
  if ((*ev)->event != FI_CONNECTED) {
    return Error{ErrorDomain::fabric, 0, Action::retry_later, "connect to " + ep->peer_ + ": unexpected CM event"};
  }
  auto data = (*ev)->data();
  peer_private.assign(data.begin(), data.end());
  return ep;
}

Result<std::unique_ptr<Endpoint>> Endpoint::accept(Domain& domain, const fi_info* request,
                                                   std::span<const std::uint8_t> private_data, int timeout_ms,
                                                   std::size_t queue_depth, const Prepare& before_accept) {
  std::unique_ptr<Endpoint> ep(new Endpoint(domain));
  if (auto r = ep->open(request, queue_depth, true); !r) return r.error();
  if (auto r = before_accept(*ep); !r) return r.error();
  if (int rc = fi_accept(ep->ep_, private_data.data(), private_data.size()); rc != 0) {
    return fabric_error(rc, "fi_accept");
  }
  auto ev = read_cm_event(ep->eq_, timeout_ms, "accept");
  if (!ev) return ev.error();
  if (!*ev || (*ev)->event != FI_CONNECTED) {
    return Error{ErrorDomain::fabric, ETIMEDOUT, Action::fail, "accept: the peer did not complete the connection"};
  }
  return ep;
}

Endpoint::~Endpoint() {
  // ORDER: the endpoint before the queues bound to it.
  close_fid(ep_ ? &ep_->fid : nullptr);
  close_fid(cq_ ? &cq_->fid : nullptr);
  close_fid(eq_ ? &eq_->fid : nullptr);
}

void Endpoint::wake() {
  if (cq_) fi_cq_signal(cq_);
}

bool Endpoint::try_wait() {
  fid* f = &cq_->fid;
  return fi_trywait(domain_.fabric(), &f, 1) == FI_SUCCESS;
}

void Endpoint::shutdown() {
  if (ep_ && !gone_) fi_shutdown(ep_, 0);
  gone_ = true;
}

Result<void> Endpoint::post_recv(OpContext* ctx, void* buf, std::size_t len, void* desc) {
  return post_result(fi_recv(ep_, buf, len, desc, 0, ctx), "fi_recv");
}

std::uint64_t Endpoint::fence() const {
  return fence_after_read_ && reads_out_.load(std::memory_order_relaxed) > 0 ? FI_FENCE : 0;
}

Result<void> Endpoint::post_send(OpContext* ctx, const void* buf, std::size_t len, void* desc, bool signalled) {
  iovec iov{const_cast<void*>(buf), len};
  fi_msg msg{&iov, &desc, 1, 0, ctx, 0};
  return post_result(fi_sendmsg(ep_, &msg, (signalled ? FI_COMPLETION : 0) | fence()), "fi_sendmsg");
}

namespace {
ssize_t post_rma(fid_ep* ep, bool write, OpContext* ctx, void* local, std::size_t len, void* desc,
                 std::uint64_t remote_addr, std::uint32_t key, std::uint64_t flags) {
  iovec iov{local, len};
  fi_rma_iov rma{remote_addr, len, key};
  fi_msg_rma msg{&iov, &desc, 1, 0, &rma, 1, ctx, 0};
  return write ? fi_writemsg(ep, &msg, flags) : fi_readmsg(ep, &msg, flags);
}
}  // namespace

Result<void> Endpoint::post_read(OpContext* ctx, void* local, std::size_t len, void* desc, std::uint64_t remote_addr,
                                 std::uint32_t key) {
  if (fence_after_read_) reads_out_.fetch_add(1, std::memory_order_relaxed);
  auto r = post_result(post_rma(ep_, false, ctx, local, len, desc, remote_addr, key, FI_COMPLETION), "fi_readmsg");
  if (!r && fence_after_read_) reads_out_.fetch_sub(1, std::memory_order_relaxed);
  return r;
}

Result<void> Endpoint::post_write(OpContext* ctx, const void* local, std::size_t len, void* desc,
                                  std::uint64_t remote_addr, std::uint32_t key, bool signalled) {
  return post_result(post_rma(ep_, true, ctx, const_cast<void*>(local), len, desc, remote_addr, key,
                         (signalled ? FI_COMPLETION : 0) | fence()),
                "fi_writemsg");
}

Result<std::size_t> Endpoint::poll(std::span<Completion> out, int timeout_ms) {
  fi_cq_msg_entry entries[32];
  std::size_t max = std::min<std::size_t>(out.size(), 32);
  ssize_t n = timeout_ms > 0 ? fi_cq_sread(cq_, entries, max, nullptr, timeout_ms) : fi_cq_read(cq_, entries, max);
  if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) return std::size_t{0};
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq_, &err, 0) < 0) return std::size_t{0};
    out[0] = {err.op_context, err.flags, err.len, err.err ? err.err : EIO};
    read_done(err.flags);
    return std::size_t{1};
  }
  if (n < 0) return fabric_error(static_cast<int>(n), "fi_cq_read");
  for (ssize_t i = 0; i < n; ++i) {
    out[i] = {entries[i].op_context, entries[i].flags, entries[i].len, 0};
    read_done(entries[i].flags);
  }
  return static_cast<std::size_t>(n);
}

bool Endpoint::peer_address(sockaddr_storage& out, socklen_t& len) const {
  std::size_t n = sizeof out;
  if (fi_getpeer(ep_, &out, &n) != 0) return false;
  len = static_cast<socklen_t>(n);
  return true;
}

bool Endpoint::peer_gone() {
  if (gone_) return true;
  std::uint32_t event = 0;
  std::uint8_t buf[kCmEntryBytes];
  ssize_t n = fi_eq_read(eq_, &event, buf, sizeof buf, 0);
  if ((n >= 0 && event == FI_SHUTDOWN) || n == -FI_EAVAIL) gone_ = true;
  if (n == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    fi_eq_readerr(eq_, &err, 0);
  }
  return gone_;
}

Result<std::unique_ptr<Listener>> Listener::listen(const std::string& provider, const std::string& host,
                                                   std::uint16_t port) {
  std::unique_ptr<Listener> l(new Listener);
  auto info = get_info(provider, host, std::to_string(port), true);
  if (!info) return info.error();
  l->info_ = std::move(*info);
  // A passive endpoint needs a fabric, not a domain: with no address to
  // listen on, verbs' passive info names no one device.
  if (int rc = fi_fabric(l->info_->fabric_attr, &l->fabric_, nullptr); rc != 0) return fabric_error(rc, "fi_fabric");
  fi_eq_attr eq_attr{};
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  eq_attr.flags = FI_WRITE;  // wake() writes to it; verbs refuses that otherwise
  if (int rc = fi_eq_open(l->fabric_, &eq_attr, &l->eq_, nullptr); rc != 0) return fabric_error(rc, "fi_eq_open");
  if (int rc = fi_passive_ep(l->fabric_, l->info_.get(), &l->pep_, nullptr); rc != 0) {
    return fabric_error(rc, "fi_passive_ep");
  }
  if (int rc = fi_pep_bind(l->pep_, &l->eq_->fid, 0); rc != 0) return fabric_error(rc, "fi_pep_bind");
  if (int rc = fi_listen(l->pep_); rc != 0) {
    return fabric_error(rc, "listen on " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port));
  }
  return l;
}

Listener::~Listener() {
  // ORDER: the passive endpoint and its queue before the fabric; domains
  // (and what is registered in them) go with the members, after.
  close_fid(pep_ ? &pep_->fid : nullptr);
  close_fid(eq_ ? &eq_->fid : nullptr);
  close_fid(fabric_ ? &fabric_->fid : nullptr);
}

Result<Domain*> Listener::domain_for(const ConnectRequest& req) {
  const char* name = req.info->domain_attr && req.info->domain_attr->name ? req.info->domain_attr->name : "";
  auto it = domains_.find(name);
  if (it == domains_.end()) {
    auto d = Domain::open(req.info.get());
    if (!d) return d.error();
    it = domains_.emplace(name, std::move(*d)).first;
  }
  return it->second.get();
}

std::uint16_t Listener::port() const {
  sockaddr_storage ss{};
  std::size_t len = sizeof ss;
  if (fi_getname(&pep_->fid, &ss, &len) != 0) return 0;
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

Result<std::optional<ConnectRequest>> Listener::wait_request(int timeout_ms) {
  auto ev = read_cm_event(eq_, timeout_ms, "listen");
  if (!ev) return ev.error();
  if (!*ev) return std::optional<ConnectRequest>{};
  if ((*ev)->event != FI_CONNREQ) return std::optional<ConnectRequest>{};
  ConnectRequest req;
  req.info = Info((*ev)->entry()->info);
  auto data = (*ev)->data();
  req.private_data.assign(data.begin(), data.end());
  return std::optional<ConnectRequest>{std::move(req)};
}

bool ConnectRequest::peer_address(sockaddr_storage& out, socklen_t& len) const {
  const fi_info* i = info.get();
  if (!i || !i->dest_addr || i->dest_addrlen == 0 || i->dest_addrlen > sizeof out) return false;
  if (i->addr_format != FI_SOCKADDR_IN && i->addr_format != FI_SOCKADDR_IN6 && i->addr_format != FI_SOCKADDR) {
    return false;
  }
  std::memcpy(&out, i->dest_addr, i->dest_addrlen);
  len = static_cast<socklen_t>(i->dest_addrlen);
  return true;
}

void Listener::reject(const ConnectRequest& req) { fi_reject(pep_, req.info->handle, nullptr, 0); }

void Listener::wake() {
  fi_eq_entry entry{};
  fi_eq_write(eq_, FI_NOTIFY, &entry, sizeof entry, 0);
}

}  // namespace nfsrdma::fabric
