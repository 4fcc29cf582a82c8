#include "tests/nlm_peer.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "lib/nfs3/portmap2.hpp"
#include "lib/rpc/rpc.hpp"

namespace nfsrdma::test {

namespace {

Fd listen_on(const std::string& address, std::uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1 ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd.get(), 16) != 0) {
    return {};
  }
  return fd;
}

bool read_full(int fd, std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

PeerHost::PeerHost(std::string address, Handler handler) : address_(std::move(address)), handler_(std::move(handler)) {
  portmap_fd_ = listen_on(address_, portmap2::kPort);
  service_fd_ = listen_on(address_, 0);
  if (!portmap_fd_.valid() || !service_fd_.valid()) return;
  service_port_ = tcp::local_port(service_fd_.get());
  ok_ = true;
  threads_.emplace_back([this] { serve(portmap_fd_.get(), true); });
  threads_.emplace_back([this] { serve(service_fd_.get(), false); });
}

PeerHost::~PeerHost() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
  if (portmap_fd_.valid()) ::shutdown(portmap_fd_.get(), SHUT_RDWR);
  if (service_fd_.valid()) ::shutdown(service_fd_.get(), SHUT_RDWR);
  for (auto& t : threads_) t.join();
}

void PeerHost::serve(int listen_fd, bool portmap) {
  for (;;) {
    int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    std::lock_guard lk(mu_);
    if (stopping_) {
      ::close(c);
      return;
    }
    open_.push_back(c);
    threads_.emplace_back([this, c, portmap] { connection(Fd(c), portmap); });
  }
}

void PeerHost::connection(Fd fd, bool portmap) {
  for (;;) {
    std::uint8_t mark[4];
    if (!read_full(fd.get(), mark, 4)) break;
    const std::uint32_t len = (static_cast<std::uint32_t>(mark[0] & 0x7f) << 24) | (mark[1] << 16) | (mark[2] << 8) | mark[3];
    if (len > (1u << 20)) break;
    std::vector<std::uint8_t> msg(len);
    if (!read_full(fd.get(), msg.data(), len)) break;
    xdr::Decoder d(msg);
    auto h = rpc::decode_call(d);
    if (!h) break;
    std::optional<std::vector<std::uint8_t>> result;
    if (portmap) {
      // Every GETPORT finds the one service listener.
      result.emplace();
      xdr::Encoder e(*result);
      e.u32(h->proc == static_cast<std::uint32_t>(portmap2::Proc::GETPORT) ? service_port_ : 0);
    } else {
      Call call{h->prog, h->vers, h->proc, {msg.begin() + static_cast<long>(d.position()), msg.end()}};
      result = handler_(call);
      {
        std::lock_guard lk(mu_);
        calls_.push_back(std::move(call));
      }
      cv_.notify_all();
    }
    if (!result) continue;
    std::vector<std::uint8_t> reply(4);
    xdr::Encoder e(reply);
    rpc::encode_accepted(e, h->xid, rpc::AcceptStat::success);
    reply.insert(reply.end(), result->begin(), result->end());
    const std::uint32_t n = static_cast<std::uint32_t>(reply.size() - 4) | 0x80000000u;
    reply[0] = static_cast<std::uint8_t>(n >> 24);
    reply[1] = static_cast<std::uint8_t>(n >> 16);
    reply[2] = static_cast<std::uint8_t>(n >> 8);
    reply[3] = static_cast<std::uint8_t>(n);
    if (::send(fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(reply.size())) break;
  }
  std::lock_guard lk(mu_);
  std::erase(open_, fd.get());
}

std::optional<PeerHost::Call> PeerHost::wait_for(std::uint32_t prog, std::uint32_t proc, int timeout_ms) {
  std::unique_lock lk(mu_);
  std::optional<Call> out;
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] {
    auto it = std::find_if(calls_.begin(), calls_.end(), [&](const Call& c) { return c.prog == prog && c.proc == proc; });
    if (it == calls_.end()) return false;
    out = std::move(*it);
    calls_.erase(it);
    return true;
  });
  return out;
}

}  // namespace nfsrdma::test
