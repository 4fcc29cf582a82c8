// Small socket helpers shared by the TCP client and server: address parsing, and the one place we set the socket options we rely on.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "lib/base/fd.hpp"
#include "lib/base/result.hpp"

namespace nfsrdma::tcp {

// Resolves a numeric or named host and a port (no DNS beyond /etc/hosts is
// needed for the addresses we use, but getaddrinfo handles both).
Result<sockaddr_storage> resolve(const std::string& host, std::uint16_t port, socklen_t& len);

// A listening socket with SO_REUSEADDR; `port` 0 picks a free port.
Result<Fd> listen_tcp(const std::string& host, std::uint16_t port, int backlog = 128);
std::uint16_t local_port(int fd);

// Connects, binding a reserved source port (< 1024) first when asked to and
// permitted (root), as NFS clients do for servers that demand `secure`.
Result<Fd> connect_tcp(const std::string& host, std::uint16_t port, bool reserved_port,
                       const std::string& source_address = {}, int timeout_ms = 0);

void set_nodelay(int fd);
Result<void> set_nonblocking(int fd);

// What a sender does when a non-blocking socket is full: waits for room (and
// may do other work meanwhile); an error ends the send.
using SendFull = std::function<Result<void>()>;
// Sends every byte of the iovec list, retrying partial writes; on a
// non-blocking socket, calling `full` each time the socket takes nothing.
Result<void> send_all(int fd, struct iovec* iov, int iovcnt, const SendFull& full = {});

}  // namespace nfsrdma::tcp
