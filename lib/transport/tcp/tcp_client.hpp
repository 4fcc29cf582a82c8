// The client side of RPC over TCP: one connection, many calls in flight,
// replies matched to calls by xid.
//
// Theory of operation: call() registers the handler under its xid, then writes
// the record under the send mutex. A reader thread reassembles records and runs
// the matching handler (on the reader thread). When the connection fails, every
// pending call's handler runs with an error whose action is `reconnect`; the
// owner (client/core) decides whether to reconnect and retransmit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "lib/rpc/transport.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {

struct TcpClientOptions {
  // A limit, not a buffer: records are read into what they need. 4 MiB of
  // data plus headers: the largest READ reply a server may offer.
  std::size_t max_record_bytes = (4u << 20) + 64 * 1024;
  bool reserved_port = true;  // bind a source port < 1024 when root
  std::string source_address;  // bind this local address first (empty: any)
  int connect_timeout_ms = 0;  // 0: the kernel's SYN retries (minutes)
};

class TcpClient final : public rpc::ClientTransport {
 public:
  static Result<std::unique_ptr<TcpClient>> connect(const std::string& host, std::uint16_t port,
                                                    TcpClientOptions options = {});
  ~TcpClient() override;

  void call(const rpc::OutgoingCall& call, rpc::ReplyHandler on_reply) override;
  void shutdown() override;

 private:
  TcpClient(Fd fd, TcpClientOptions options, std::string peer);
  void reader_loop();
  void deliver(const std::vector<std::uint8_t>& reply);  // to the call it answers, if still pending
  void fail_all(const Error& e);

  Fd fd_;
  TcpClientOptions options_;
  std::string peer_;
  std::mutex send_mu_;  // ORDER: send_mu_ before calls_mu_
  std::mutex calls_mu_;
  std::pmr::unsynchronized_pool_resource call_nodes_;  // calls_'s, kept for the next calls
  std::pmr::unordered_map<std::uint32_t, rpc::ReplyHandler> calls_{&call_nodes_};  // guarded by calls_mu_
  bool broken_ = false;                                           // guarded by calls_mu_
  std::atomic<bool> shutting_down_{false};
  std::thread reader_;
};

}  // namespace nfsrdma::tcp
