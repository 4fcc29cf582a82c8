#include "lib/transport/tcp/tcp_server.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
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
  std::vector<std::shared_ptr<EventLoop>> on = options_.event_loops;
  if (on.empty()) on = own_loops_ = EventLoop::make(options_.loops, "tcp-loop");
  for (unsigned i = 0; i < on.size(); ++i) loops_.push_back(std::make_unique<TcpLoop>(*this, *on[i], i));
  waker_ = budget_->on_room([this] {
    for (auto& l : loops_) l->on_budget_room();
  });
}

TcpServer::~TcpServer() {
  budget_->forget(waker_);  // ORDER: before the loops it wakes go
  stop();
  for (auto& l : own_loops_) l->join();
  if (own_loops_.empty()) retired_.wait_for(loops_.size());  // shared loops run on: each must be done with its part
  loops_.clear();
}

Result<std::uint16_t> TcpServer::add_listener(const std::string& host, std::uint16_t port, int tag) {
  auto fd = listen_tcp(host, port);
  if (!fd) return fd.error();
  if (auto r = set_nonblocking(fd->get()); !r) return r.error();
  std::uint16_t bound = local_port(fd->get());
  listeners_.push_back({std::move(*fd), tag});
  return bound;
}

void TcpServer::serve() {
  std::lock_guard lk(listeners_mu_);  // intake may stop meanwhile (drop_listeners)
  for (auto& l : listeners_) {
    if (!loops_[0]->watch(l.fd.get(), EPOLLIN)) spdlog::error("tcp: cannot accept: epoll_ctl: {}", std::strerror(errno));
  }
}

void TcpServer::run() {
  serve();
  for (auto& l : own_loops_) l->start();
  for (auto& l : own_loops_) l->join();
}

void TcpServer::stop_intake() {
  intake_stopped_ = true;
  for (auto& l : loops_) l->wake();
}

void TcpServer::stop() {
  stopping_ = true;
  intake_stopped_ = true;
  for (auto& l : loops_) l->wake();
  for (auto& l : own_loops_) l->stop();  // each ends once its part is finished
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

void TcpServer::drop_listeners(TcpLoop& loop) {
  std::lock_guard lk(listeners_mu_);
  for (auto& l : listeners_) loop.unwatch(l.fd.get());
  listeners_.clear();
}

void TcpServer::close_expired() {
  for (std::uint64_t id : admission_.expired()) close_ticket(id, "idle past the timeout");
}

void TcpServer::close_ticket(std::uint64_t id, const char* why) {
  for (auto& l : loops_) l->close_ticket(id, why);
}

}  // namespace nfsrdma::tcp
