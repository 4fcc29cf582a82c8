#include "lib/rpc/transport.hpp"

#include <cstring>

#include <arpa/inet.h>

namespace nfsrdma::rpc {

std::array<std::uint8_t, 16> to_v6(const sockaddr_storage& addr) {
  std::array<std::uint8_t, 16> b{};
  if (addr.ss_family == AF_INET) {
    b[10] = b[11] = 0xff;
    std::memcpy(b.data() + 12, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, 4);
  } else if (addr.ss_family == AF_INET6) {
    std::memcpy(b.data(), &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, 16);
  }
  return b;
}

sockaddr_storage from_v6(const std::array<std::uint8_t, 16>& a) {
  sockaddr_storage out{};
  static const std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(a.data(), mapped, 12) == 0) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&out);
    in4->sin_family = AF_INET;
    std::memcpy(&in4->sin_addr, a.data() + 12, 4);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, a.data(), 16);
  }
  return out;
}

bool is_loopback(const sockaddr_storage& addr) {
  const auto a = to_v6(addr);
  static const std::uint8_t v4_loopback[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127};
  static const std::uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a.data(), v4_loopback, 13) == 0 || std::memcmp(a.data(), v6_loopback, 16) == 0;
}

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
