#include "lib/transport/tcp/tcp_server.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <arpa/inet.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <deque>

#include "lib/base/log.hpp"
#include "lib/transport/tcp/record.hpp"

namespace nfsrdma::tcp {

class TcpConnection final : public rpc::ReplyChannel,
                            public std::enable_shared_from_this<TcpConnection> {
 public:
  TcpConnection(TcpServer& server, Fd fd, rpc::Peer peer, int tag)
      : server_(server), fd_(std::move(fd)), peer_(peer), tag_(tag), reader_(server.options_.max_record_bytes) {}

  void send(rpc::ReplyMessage&& reply) override {
    std::lock_guard lk(mu_);
    if (in_flight_ > 0) --in_flight_;
    if (closed_) return;
    out_.push_back({record_mark(static_cast<std::uint32_t>(reply.bytes.size())), std::move(reply.bytes), 0});
    if (out_.size() == 1) flush_locked();
    update_events_locked();
  }

  void drop() override {
    std::lock_guard lk(mu_);
    if (in_flight_ > 0) --in_flight_;
    if (!closed_) update_events_locked();
  }

  void close() override {
    std::lock_guard lk(mu_);
    close_locked();
  }

  const rpc::Peer& peer() const override { return peer_; }

  void refresh_events() {
    std::lock_guard lk(mu_);
    update_events_locked();
  }

  int tag() const { return tag_; }
  bool secure() const {
    const auto& a = peer_.addr;
    std::uint16_t port = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                                 : ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    return port < 1024;
  }
  // Loop thread only.
  RecordReader& reader() { return reader_; }
  int fd() const { return raw_fd_; }

  // Returns false when the socket failed and the connection should go.
  bool on_writable() {
    std::lock_guard lk(mu_);
    if (closed_) return false;
    bool ok = flush_locked();
    update_events_locked();
    return ok;
  }

  // Counts one more call handed out; returns false if the loop should stop
  // reading this connection until replies drain.
  bool begin_call() {
    std::lock_guard lk(mu_);
    ++in_flight_;
    update_events_locked();
    return in_flight_ < server_.options_.max_calls_in_flight;
  }

  bool has_pending_output() {
    std::lock_guard lk(mu_);
    return !closed_ && !out_.empty();
  }

  void register_with_epoll() {
    std::lock_guard lk(mu_);
    raw_fd_ = fd_.get();
    events_ = EPOLLIN;
    epoll_event ev{};
    ev.events = events_;
    ev.data.fd = raw_fd_;
    ::epoll_ctl(server_.epoll_.get(), EPOLL_CTL_ADD, raw_fd_, &ev);
  }

 private:
  struct Pending {
    std::array<std::uint8_t, 4> mark;
    std::vector<std::uint8_t> bytes;
    std::size_t sent;  // counts the mark's 4 bytes first
  };

  // Writes what the socket takes. Returns false on a socket error.
  bool flush_locked() {
    while (!out_.empty()) {
      iovec iov[16];
      int n = 0;
      for (auto it = out_.begin(); it != out_.end() && n + 2 <= 16; ++it) {
        std::size_t skip = it->sent;
        if (skip < 4) {
          iov[n++] = {it->mark.data() + skip, 4 - skip};
          skip = 0;
        } else {
          skip -= 4;
        }
        if (skip < it->bytes.size()) iov[n++] = {it->bytes.data() + skip, it->bytes.size() - skip};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(n);
      ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return true;
        spdlog::info("tcp: send to {} failed: {}", peer_.describe(), std::strerror(errno));
        close_locked();
        return false;
      }
      auto left = static_cast<std::size_t>(w);
      while (left > 0 && !out_.empty()) {
        Pending& p = out_.front();
        std::size_t rest = 4 + p.bytes.size() - p.sent;
        if (left >= rest) {
          left -= rest;
          out_.pop_front();
        } else {
          p.sent += left;
          left = 0;
        }
      }
    }
    return true;
  }

  void update_events_locked() {
    if (closed_) return;
    std::uint32_t want = 0;
    if (!server_.intake_stopped_.load() && in_flight_ < server_.options_.max_calls_in_flight) want |= EPOLLIN;
    if (!out_.empty()) want |= EPOLLOUT;
    if (want == events_) return;
    events_ = want;
    epoll_event ev{};
    ev.events = want;
    ev.data.fd = raw_fd_;
    ::epoll_ctl(server_.epoll_.get(), EPOLL_CTL_MOD, raw_fd_, &ev);
  }

  void close_locked() {
    if (closed_) return;
    closed_ = true;
    out_.clear();
    // ORDER: leave the epoll set before the fd number can be reused by accept().
    ::epoll_ctl(server_.epoll_.get(), EPOLL_CTL_DEL, raw_fd_, nullptr);
    fd_.reset();
  }

  TcpServer& server_;
  std::mutex mu_;  // guards everything below except reader_ (loop thread only)
  Fd fd_;
  int raw_fd_ = -1;
  rpc::Peer peer_;
  int tag_;
  RecordReader reader_;
  std::deque<Pending> out_;
  std::size_t in_flight_ = 0;
  std::uint32_t events_ = 0;
  bool closed_ = false;
};

TcpServer::TcpServer(TcpServerOptions options, rpc::CallHandler handler)
    : options_(options), handler_(std::move(handler)) {
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  NFSRDMA_CHECK(epoll_.valid() && wake_fd_.valid());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
}

TcpServer::~TcpServer() {
  for (auto& [fd, c] : connections_) c->close();
}

Result<std::uint16_t> TcpServer::add_listener(const std::string& host, std::uint16_t port, int tag) {
  auto fd = listen_tcp(host, port);
  if (!fd) return fd.error();
  if (auto r = set_nonblocking(fd->get()); !r) return r.error();
  std::uint16_t bound = local_port(fd->get());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd->get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd->get(), &ev);
  listeners_.push_back({std::move(*fd), tag});
  return bound;
}

void TcpServer::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void TcpServer::stop_intake() {
  intake_stopped_ = true;
  wake();
}

void TcpServer::stop() {
  stopping_ = true;
  intake_stopped_ = true;
  wake();
}

void TcpServer::accept_from(Listener& l) {
  for (;;) {
    rpc::Peer peer;
    peer.len = sizeof peer.addr;
    int raw = ::accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&peer.addr), &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (raw < 0) {
      if (errno != EAGAIN && errno != EINTR) spdlog::warn("tcp: accept failed: {}", std::strerror(errno));
      return;
    }
    Fd fd(raw);
    if (connections_.size() >= options_.max_connections) {
      spdlog::warn("tcp: refusing connection from {}: at the limit of {} connections", peer.describe(),
                   options_.max_connections);
      continue;
    }
    set_nodelay(raw);
    auto c = std::make_shared<TcpConnection>(*this, std::move(fd), peer, l.tag);
    c->register_with_epoll();
    connections_[raw] = c;
    connection_count_ = connections_.size();
    spdlog::debug("tcp: connection from {}", peer.describe());
  }
}

void TcpServer::on_readable(const std::shared_ptr<TcpConnection>& c) {
  // Bounded per wakeup so one busy client cannot starve the others.
  for (int round = 0; round < 64; ++round) {
    auto buf = c->reader().buffer();
    ssize_t n = ::recv(c->fd(), buf.data(), buf.size(), 0);
    if (n == 0) {
      spdlog::debug("tcp: {} closed the connection", c->peer().describe());
      close_connection(c->fd());
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      // A reset is how many clients (libnfs among them) hang up.
      if (errno == ECONNRESET) {
        spdlog::debug("tcp: {} reset the connection", c->peer().describe());
      } else {
        spdlog::info("tcp: receive from {} failed: {}", c->peer().describe(), std::strerror(errno));
      }
      close_connection(c->fd());
      return;
    }
    auto done = c->reader().commit(static_cast<std::size_t>(n));
    if (!done) {
      spdlog::warn("tcp: closing connection from {}: {}", c->peer().describe(), done.error().describe());
      close_connection(c->fd());
      return;
    }
    if (*done) {
      rpc::IncomingCall call{c->reader().take(), c, c->tag(), c->secure()};
      bool more = c->begin_call();
      handler_(std::move(call));
      if (!more) return;
    }
  }
}

void TcpServer::close_connection(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  it->second->close();
  connections_.erase(it);
  connection_count_ = connections_.size();
}

void TcpServer::run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point stop_deadline{};
  epoll_event events[64];
  for (;;) {
    if (intake_stopped_ && !intake_applied_) {
      intake_applied_ = true;
      for (auto& l : listeners_) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, l.fd.get(), nullptr);
      listeners_.clear();
      for (auto& [fd, c] : connections_) c->refresh_events();
    }
    if (stopping_) {
      if (stop_deadline == Clock::time_point{}) stop_deadline = Clock::now() + std::chrono::seconds(5);
      bool pending = false;
      for (auto& [fd, c] : connections_) pending |= c->has_pending_output();
      if (!pending || Clock::now() > stop_deadline) break;
    }
    int n = ::epoll_wait(epoll_.get(), events, 64, stopping_ ? 50 : -1);
    if (n < 0 && errno != EINTR) {
      spdlog::error("tcp: epoll_wait failed: {}", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_.get()) {
        std::uint64_t v;
        [[maybe_unused]] auto r = ::read(fd, &v, sizeof v);
        continue;
      }
      bool is_listener = false;
      for (auto& l : listeners_) {
        if (l.fd.get() == fd) {
          accept_from(l);
          is_listener = true;
        }
      }
      if (is_listener) continue;
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      auto c = it->second;
      if ((events[i].events & EPOLLOUT) && !c->on_writable()) {
        close_connection(fd);
        continue;
      }
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (!intake_stopped_) {
          on_readable(c);
        } else if ((events[i].events & (EPOLLHUP | EPOLLERR)) && !c->has_pending_output()) {
          close_connection(fd);
        }
      }
    }
  }
  for (auto& [fd, c] : connections_) c->close();
  connections_.clear();
  connection_count_ = 0;
}

}  // namespace nfsrdma::tcp
