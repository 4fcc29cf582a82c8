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

// One connect(2) from a fresh socket, bound first to `local` at `local_port`
// when `local` is set (port 0: the kernel picks one).
Result<Fd> connect_once(const sockaddr_storage& addr, socklen_t len, const sockaddr_storage* local, socklen_t local_len,
                        std::uint16_t local_port, int timeout_ms, const std::string& what) {
  Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return sys_error(errno, "socket");
  if (local) {
    // Reusable, as the kernel's RPC client makes its sockets: a port whose
    // earlier connections linger in TIME_WAIT binds, and only the same peer
    // is refused (at connect).
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage l = *local;
    set_port(l, local_port);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&l), local_len) != 0) return sys_error(errno, "bind local address");
  }
  // Linux applies a send timeout to connect(2) too: a peer that drops SYNs
  // then costs timeout_ms, not the minutes of the SYN retries.
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (timeout_ms > 0) ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    // From a port of our choosing, Linux says EADDRNOTAVAIL when that port is
    // taken for this peer: in use, as far as the caller is concerned.
    if (errno == EADDRNOTAVAIL && local_port != 0) return sys_error(EADDRINUSE, what);
    return sys_error(errno == EINPROGRESS ? ETIMEDOUT : errno, what);
  }
  if (timeout_ms > 0) {
    tv = {};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return fd;
}

}  // namespace

Result<Fd> connect_tcp(const std::string& host, std::uint16_t port, bool reserved_port,
                       const std::string& source_address, int timeout_ms) {
  socklen_t len = 0;
  auto addr = resolve(host, port, len);
  if (!addr) return addr.error();
  const bool reserved = reserved_port && ::geteuid() == 0;
  sockaddr_storage local{};
  socklen_t local_len = len;
  local.ss_family = addr->ss_family;
  if (!source_address.empty()) {
    auto src = resolve(source_address, 0, local_len);
    if (!src) return src.error();
    local = *src;
  }
  const sockaddr_storage* bind_to = reserved || !source_address.empty() ? &local : nullptr;
  // A reserved port walks down from 1023 like bindresvport(3). A port that
  // binds may still be taken for this peer (a closed connection from it in
  // TIME_WAIT): connect(2) then says EADDRINUSE and the next port is tried,
  // as the kernel's RPC client does. Without privilege, or once the range is
  // spent, the kernel picks the port.
  const std::string what = "connect to " + host + ":" + std::to_string(port);
  Result<Fd> fd = Error{};
  bool done = false;
  for (std::uint16_t p = 1023; reserved && p >= 600; --p) {
    fd = connect_once(*addr, len, bind_to, local_len, p, timeout_ms, what);
    if (fd || fd.error().code != EADDRINUSE) {
      done = fd || (fd.error().code != EACCES && fd.error().code != EPERM);
      break;
    }
  }
  if (!done) fd = connect_once(*addr, len, bind_to, local_len, 0, timeout_ms, what);
  if (!fd) {
    Error e = fd.error();
    e.action = Action::retry_later;
    return e;
  }
  set_nodelay(fd->get());
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

Result<void> send_all(int fd, struct iovec* iov, int iovcnt, const SendFull& full) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && full) {
        if (auto r = full(); !r) return r.error();
        continue;
      }
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
