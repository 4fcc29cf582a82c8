#include "lib/transport/tcp/tcp_client.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "lib/base/log.hpp"
#include "lib/rpc/rpc.hpp"
#include "lib/transport/tcp/record.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::tcp {

Result<std::unique_ptr<TcpClient>> TcpClient::connect(const std::string& host, std::uint16_t port,
                                                      TcpClientOptions options) {
  auto fd = connect_tcp(host, port, options.reserved_port, options.source_address, options.connect_timeout_ms);
  if (!fd) return fd.error();
  return std::unique_ptr<TcpClient>(new TcpClient(std::move(*fd), options, host + ":" + std::to_string(port)));
}

TcpClient::TcpClient(Fd fd, TcpClientOptions options, std::string peer)
    : fd_(std::move(fd)), options_(options), peer_(std::move(peer)) {
  reader_ = std::thread([this] { reader_loop(); });
}

TcpClient::~TcpClient() { shutdown(); }

void TcpClient::shutdown() {
  if (shutting_down_.exchange(true)) return;
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  fail_all(Error{ErrorDomain::rpc, ECONNABORTED, Action::fail, "rpc: transport shut down"});
}

void TcpClient::call(const rpc::OutgoingCall& call, rpc::ReplyHandler on_reply) {
  std::lock_guard send_lk(send_mu_);
  bool broken;
  {
    std::lock_guard lk(calls_mu_);
    broken = broken_;
    if (!broken) calls_[call.xid] = std::move(on_reply);
  }
  if (broken) {
    on_reply(Error{ErrorDomain::rpc, ENOTCONN, Action::reconnect, "rpc: connection to " + peer_ + " is down"});
    return;
  }
  static const std::uint8_t kZeros[4] = {};
  std::size_t pad = xdr::pad4(call.payload.size()) - call.payload.size();
  std::size_t total = call.message.size() + call.payload.size() + pad + call.tail.size();
  auto mark = record_mark(static_cast<std::uint32_t>(total));
  iovec iov[5] = {
      {mark.data(), 4},
      {const_cast<std::uint8_t*>(call.message.data()), call.message.size()},
      {const_cast<std::uint8_t*>(call.payload.data()), call.payload.size()},
      {const_cast<std::uint8_t*>(kZeros), pad},
      {const_cast<std::uint8_t*>(call.tail.data()), call.tail.size()},
  };
  if (auto r = send_all(fd_.get(), iov, 5); !r) {
    spdlog::info("rpc: send to {} failed: {}", peer_, r.error().describe());
    // The reader thread notices the broken socket and fails every pending call.
    ::shutdown(fd_.get(), SHUT_RDWR);
  }
}

void TcpClient::fail_all(const Error& e) {
  std::vector<rpc::ReplyHandler> pending;
  {
    std::lock_guard lk(calls_mu_);
    broken_ = true;
    for (auto& [xid, h] : calls_) pending.push_back(std::move(h));
    calls_.clear();
  }
  for (auto& h : pending) h(e);
}

void TcpClient::reader_loop() {
  // One record at a time: its room is kept for the next.
  BufferShelf shelf(1, 1);
  RecordReader reader(options_.max_record_bytes, &shelf);
  Error why{ErrorDomain::rpc, ECONNRESET, Action::reconnect, "rpc: connection to " + peer_ + " closed"};
  for (bool open = true; open;) {
    auto buf = reader.buffer();
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) why.message += std::string(": ") + std::strerror(errno);
      break;
    }
    reader.commit(static_cast<std::size_t>(n));
    for (;;) {
      auto done = reader.parse();
      if (!done) {
        why = done.error();
        open = false;
        break;
      }
      if (!*done) break;
      auto record = reader.take();
      deliver(record);
      shelf.give(std::move(record));
    }
  }
  if (shutting_down_) why = Error{ErrorDomain::rpc, ECONNABORTED, Action::fail, "rpc: transport shut down"};
  fail_all(why);
}

void TcpClient::deliver(const std::vector<std::uint8_t>& reply) {
  std::uint32_t xid = 0;
  if (!rpc::peek_xid(reply, xid)) return;
  rpc::ReplyHandler h;
  {
    std::lock_guard lk(calls_mu_);
    auto it = calls_.find(xid);
    if (it == calls_.end()) {
      spdlog::debug("rpc: reply from {} with unknown xid {:#x} ignored", peer_, xid);
      return;
    }
    h = std::move(it->second);
    calls_.erase(it);
  }
  h(std::span<const std::uint8_t>(reply));
}

}  // namespace nfsrdma::tcp
