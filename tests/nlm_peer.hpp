// A client host as the server's callbacks see it: a portmapper on port 111
// of a loopback address of its own and one RPC listener behind it, answering
// with a handler the test gives (NLM GRANTED, NSM NOTIFY, _RES calls). Every
// call it receives is kept, to be waited for.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::test {

class PeerHost {
 public:
  struct Call {
    std::uint32_t prog = 0, vers = 0, proc = 0;
    std::vector<std::uint8_t> args;
  };
  // The result bytes of a call; std::nullopt: never answer it.
  using Handler = std::function<std::optional<std::vector<std::uint8_t>>(const Call&)>;

  // Listens on `address`:111 and `address`:any; valid() false if it cannot
  // (port 111 taken, e.g. by an rpcbind on every address).
  PeerHost(std::string address, Handler handler);
  ~PeerHost();
  bool valid() const { return ok_; }
  const std::string& address() const { return address_; }
  // Waits up to `timeout_ms` for a call of program `prog` and procedure
  // `proc` not yet taken; takes it.
  std::optional<Call> wait_for(std::uint32_t prog, std::uint32_t proc, int timeout_ms);

 private:
  void serve(int listen_fd, bool portmap);
  void connection(Fd fd, bool portmap);

  std::string address_;
  Handler handler_;
  bool ok_ = false;
  Fd portmap_fd_, service_fd_;
  std::uint16_t service_port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::vector<int> open_;  // connections being served, shut down at the end
};

}  // namespace nfsrdma::test
