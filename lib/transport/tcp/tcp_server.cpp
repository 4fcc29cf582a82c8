#include "lib/transport/tcp/tcp_server.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "lib/base/log.hpp"
#include "lib/transport/tcp/tcp_loop.hpp"

namespace nfsrdma::tcp {

TcpServer::TcpServer(TcpServerOptions options, rpc::CallHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)), admission_("tcp", options_.admission),
      budget_(options_.budget), step_bytes_(2 * options_.max_record_bytes) {
  if (!budget_) {
    const std::size_t limit = rpc::MemoryBudget::default_limit();
    own_budget_ = std::make_unique<rpc::MemoryBudget>(limit, limit);
    budget_ = own_budget_.get();
  }
  const unsigned n = options_.loops ? options_.loops : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) loops_.push_back(std::make_unique<TcpLoop>(*this, i));
  waker_ = budget_->on_room([this] {
    for (auto& l : loops_) l->on_budget_room();
  });
}

TcpServer::~TcpServer() {
  budget_->forget(waker_);  // ORDER: before the loops it wakes go
  loops_.clear();
}

Result<std::uint16_t> TcpServer::add_listener(const std::string& host, std::uint16_t port, int tag) {
  auto fd = listen_tcp(host, port);
  if (!fd) return fd.error();
  if (auto r = set_nonblocking(fd->get()); !r) return r.error();
  std::uint16_t bound = local_port(fd->get());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd->get();
  ::epoll_ctl(loops_[0]->epoll_fd(), EPOLL_CTL_ADD, fd->get(), &ev);
  listeners_.push_back({std::move(*fd), tag});
  return bound;
}

void TcpServer::run() {
  for (auto& l : loops_) l->start();
  for (auto& l : loops_) l->join();
}

void TcpServer::stop_intake() {
  intake_stopped_ = true;
  for (auto& l : loops_) l->wake();
}

void TcpServer::stop() {
  stopping_ = true;
  intake_stopped_ = true;
  for (auto& l : loops_) l->wake();
}

bool TcpServer::accept_from(int fd) {
  auto l = std::find_if(listeners_.begin(), listeners_.end(), [fd](const Listener& x) { return x.fd.get() == fd; });
  if (l == listeners_.end()) return false;
  for (;;) {
    rpc::Peer peer;
    peer.len = sizeof peer.addr;
    int raw = ::accept4(fd, reinterpret_cast<sockaddr*>(&peer.addr), &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (raw < 0) {
      if (errno != EAGAIN && errno != EINTR) spdlog::warn("tcp: accept failed: {}", std::strerror(errno));
      return true;
    }
    Fd conn(raw);
    if (intake_stopped_) continue;  // closed: no loop may read it any more
    auto d = admission_.admit(peer);
    if (!d.ticket) continue;  // refused (counted and logged by admission_)
    if (d.evict) close_ticket(*d.evict, "to make room");
    set_nodelay(raw);
    auto to = std::min_element(loops_.begin(), loops_.end(), [](auto& a, auto& b) { return a->load() < b->load(); });
    (*to)->adopt(std::move(conn), peer, l->tag, std::move(d.ticket));
  }
}

void TcpServer::drop_listeners(int epoll_fd) {
  for (auto& l : listeners_) ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, l.fd.get(), nullptr);
  listeners_.clear();
}

void TcpServer::close_expired() {
  for (std::uint64_t id : admission_.expired()) close_ticket(id, "idle past the timeout");
}

void TcpServer::close_ticket(std::uint64_t id, const char* why) {
  for (auto& l : loops_) l->close_ticket(id, why);
}

}  // namespace nfsrdma::tcp
