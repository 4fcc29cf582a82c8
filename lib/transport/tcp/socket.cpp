#include "lib/transport/tcp/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace nfsrdma::tcp {

Result<sockaddr_storage> resolve(const std::string& host, std::uint16_t port, socklen_t& len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (host.empty() ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return Error{ErrorDomain::config, rc, Action::fail,
                 "cannot resolve '" + host + "': " + gai_strerror(rc)};
  }
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

Result<Fd> listen_tcp(const std::string& host, std::uint16_t port, int backlog) {
  socklen_t len = 0;
  auto addr = resolve(host, port, len);
  if (!addr) return addr.error();
  Fd fd(::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return sys_error(errno, "socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), len) != 0) {
    return sys_error(errno, "bind " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port));
  }
  if (::listen(fd.get(), backlog) != 0) return sys_error(errno, "listen");
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

namespace {

void set_port(sockaddr_storage& ss, std::uint16_t port) {
  if (ss.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  }
}

// Binds the local side: `local` (address, port 0) and, when asked, a reserved
// port walking down from 1023 like bindresvport(3).
Result<void> bind_local(int fd, sockaddr_storage local, socklen_t len, bool reserved) {
  if (reserved) {
    for (std::uint16_t p = 1023; p >= 600; --p) {
      set_port(local, p);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&local), len) == 0) return {};
      if (errno == EACCES || errno == EPERM) break;
    }
  }
  set_port(local, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), len) != 0) return sys_error(errno, "bind local address");
  return {};
}

}  // namespace

Result<Fd> connect_tcp(const std::string& host, std::uint16_t port, bool reserved_port,
                       const std::string& source_address, int timeout_ms) {
  socklen_t len = 0;
  auto addr = resolve(host, port, len);
  if (!addr) return addr.error();
  Fd fd(::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return sys_error(errno, "socket");
  bool reserved = reserved_port && ::geteuid() == 0;
  if (reserved || !source_address.empty()) {
    sockaddr_storage local{};
    socklen_t local_len = len;
    local.ss_family = addr->ss_family;
    if (!source_address.empty()) {
      auto src = resolve(source_address, 0, local_len);
      if (!src) return src.error();
      local = *src;
    }
    if (auto r = bind_local(fd.get(), local, local_len, reserved); !r) return r.error();
  }
  // Linux applies a send timeout to connect(2) too: a peer that drops SYNs
  // then costs timeout_ms, not the minutes of the SYN retries.
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (timeout_ms > 0) ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), len) != 0) {
    Error e = sys_error(errno == EINPROGRESS ? ETIMEDOUT : errno, "connect to " + host + ":" + std::to_string(port));
    e.action = Action::retry_later;
    return e;
  }
  if (timeout_ms > 0) {
    tv = {};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  set_nodelay(fd.get());
  return fd;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Result<void> set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return sys_error(errno, "fcntl");
  return {};
}

Result<void> send_all(int fd, struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error(errno, "send");
    }
    auto left = static_cast<std::size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return {};
}

}  // namespace nfsrdma::tcp
