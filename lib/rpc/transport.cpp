#include "lib/rpc/transport.hpp"

#include <arpa/inet.h>

namespace nfsrdma::rpc {

std::string Peer::describe() const {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return std::string("[") + host + "]:" + std::to_string(port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace nfsrdma::rpc
