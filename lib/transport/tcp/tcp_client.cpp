#include "lib/transport/tcp/tcp_client.hpp"

#include <poll.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "lib/base/log.hpp"
#include "lib/rpc/rpc.hpp"
#include "lib/xdr/xdr.hpp"

namespace nfsrdma::tcp {

namespace {
// The most replies one progress() runs, so a reaper that asked for a few
// gets them back while more keep coming.
constexpr std::size_t kProgressBatch = 64;
}  // namespace

Result<std::unique_ptr<TcpClient>> TcpClient::connect(const std::string& host, std::uint16_t port,
                                                      TcpClientOptions options) {
  auto fd = connect_tcp(host, port, options.reserved_port, options.source_address, options.connect_timeout_ms);
  if (!fd) return fd.error();
  if (options.caller_progress) {
    if (auto r = set_nonblocking(fd->get()); !r) return r.error();
  }
  return std::unique_ptr<TcpClient>(new TcpClient(std::move(*fd), options, host + ":" + std::to_string(port)));
}

TcpClient::TcpClient(Fd fd, TcpClientOptions options, std::string peer)
    : fd_(std::move(fd)), options_(std::move(options)), peer_(std::move(peer)) {
  held_.reserve(kMostHeld);
  held_iov_.reserve(5 * kMostHeld);
  if (!options_.caller_progress) reading_ = std::thread([this] { reader_loop(); });
}

TcpClient::~TcpClient() { shutdown(); }

void TcpClient::shutdown() {
  if (shutting_down_.exchange(true)) return;
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (reading_.joinable()) reading_.join();
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
  held_.push_back(Held{record_mark(static_cast<std::uint32_t>(call.message.stream_bytes())), call.message});
  if (!holding_ || held_.size() == kMostHeld) send_held_locked();
}

void TcpClient::hold_sends() {
  if (!options_.caller_progress) return;  // calls from many threads: each sends its own
  std::lock_guard send_lk(send_mu_);
  holding_ = true;
}

void TcpClient::send_held() {
  std::lock_guard send_lk(send_mu_);
  holding_ = false;
  send_held_locked();
}

void TcpClient::send_held_locked() {
  if (held_.empty()) return;
  static const std::uint8_t kZeros[4] = {};
  held_iov_.clear();
  for (Held& h : held_) {
    const xdr::Parts& m = h.message;
    std::size_t pad = xdr::pad4(m.payload.size()) - m.payload.size();
    held_iov_.push_back({h.mark.data(), 4});
    held_iov_.push_back({const_cast<std::uint8_t*>(m.head.data()), m.head.size()});
    if (!m.payload.empty()) held_iov_.push_back({const_cast<std::uint8_t*>(m.payload.data()), m.payload.size()});
    if (pad) held_iov_.push_back({const_cast<std::uint8_t*>(kZeros), pad});
    if (!m.tail.empty()) held_iov_.push_back({const_cast<std::uint8_t*>(m.tail.data()), m.tail.size()});
  }
  send_locked(held_iov_.data(), static_cast<int>(held_iov_.size()));
  held_.clear();
}

void TcpClient::send_locked(iovec* iov, int count) {
  SendFull full;
  if (options_.caller_progress) full = [this] { return absorb(); };
  if (auto r = send_all(fd_.get(), iov, count, full); !r) {
    spdlog::info("rpc: send to {} failed: {}", peer_, r.error().describe());
    {
      std::lock_guard lk(calls_mu_);
      broken_ = true;  // calls from now on fail at once
    }
    // Whoever reads the socket next finds it shut and fails every pending call.
    ::shutdown(fd_.get(), SHUT_RDWR);
  }
}

Result<void> TcpClient::absorb() {
  pollfd p{fd_.get(), POLLIN | POLLOUT, 0};
  // In slices, so a shutdown is noticed.
  if (::poll(&p, 1, 1000) < 0 && errno != EINTR) return sys_error(errno, "poll");
  if (shutting_down_) return Error{ErrorDomain::rpc, ECONNABORTED, Action::fail, "rpc: transport shut down"};
  if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) return {};
  std::lock_guard lk(recv_mu_);
  if (ended_) return *ended_;
  // A few at a time, then the send is tried again.
  for (std::size_t n = 0; n < kProgressBatch; ++n) {
    std::vector<std::uint8_t> record;
    auto got = next_record_locked(record);
    if (!got) {
      ended_ = got.error();  // progress() ends the calls
      return got.error();
    }
    if (!*got) return {};
    // Kept with its call's handler, taken from calls_: only one reply per
    // call in flight is kept, so a server cannot fill our memory while we
    // wait to send.
    if (auto h = take_handler(record)) absorbed_.emplace_back(Absorbed{std::move(record), std::move(h)});
  }
  return {};
}

void TcpClient::fail_all(const Error& e) {
  Fifo<Absorbed> absorbed;
  std::vector<rpc::ReplyHandler> pending;
  // The connection is over: a send blocked on it returns, and the calls a
  // hold kept are dropped before their callers hear, since they may then
  // free what those calls' parts view.
  ::shutdown(fd_.get(), SHUT_RDWR);
  {
    std::lock_guard slk(send_mu_);
    held_.clear();
  }
  {
    // Both at once, and the end recorded: an absorb() after this takes no
    // handler out of calls_ into a queue nobody would empty.
    std::lock_guard rlk(recv_mu_);
    if (!ended_) ended_ = e;
    std::swap(absorbed, absorbed_);
    std::lock_guard lk(calls_mu_);
    broken_ = true;
    for (auto& [xid, h] : calls_) pending.push_back(std::move(h));
    calls_.clear();
  }
  while (!absorbed.empty()) {
    Absorbed a = absorbed.pop_front();
    a.handler(xdr::Parts{a.record});
  }
  for (auto& h : pending) h(e);
}

Result<bool> TcpClient::next_record_locked(std::vector<std::uint8_t>& out) {
  for (;;) {
    auto parsed = reader_.parse();
    if (!parsed) return parsed.error();
    if (*parsed) {
      out = reader_.take();
      return true;
    }
    if (drained_) {
      // The last read took less than there was room for, and brought
      // whole records only: the socket was most likely empty then, and a
      // caller-driven client returns (or waits in poll()) rather than read
      // it again at once for nothing. Within a large record it reads on.
      drained_ = false;
      if (!reader_.in_record()) return false;
    }
    auto buf = reader_.buffer();
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n <= 0) {
      Error why{ErrorDomain::rpc, ECONNRESET, Action::reconnect, "rpc: connection to " + peer_ + " closed"};
      if (n < 0) why.message += std::string(": ") + std::strerror(errno);
      if (shutting_down_) why = Error{ErrorDomain::rpc, ECONNABORTED, Action::fail, "rpc: transport shut down"};
      return why;
    }
    reader_.commit(static_cast<std::size_t>(n));
    drained_ = options_.caller_progress && static_cast<std::size_t>(n) < buf.size();
  }
}

void TcpClient::reader_loop() {
  // A blocking socket: a record, or the connection's end.
  for (;;) {
    std::vector<std::uint8_t> record;
    Result<bool> got = false;
    {
      std::lock_guard lk(recv_mu_);
      got = next_record_locked(record);
    }
    if (!got) return fail_all(got.error());
    deliver(record);
    shelf_.give(std::move(record));
  }
}

Result<std::size_t> TcpClient::progress(int timeout_ms) {
  if (!options_.caller_progress) return std::size_t{0};
  {
    std::lock_guard send_lk(send_mu_);
    send_held_locked();  // their replies may be what the caller waits for
  }
  std::size_t ran = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (ran < kProgressBatch) {
    std::vector<std::uint8_t> record;
    rpc::ReplyHandler absorbed;
    Result<bool> got = false;
    {
      std::lock_guard lk(recv_mu_);
      if (!absorbed_.empty()) {
        Absorbed a = absorbed_.pop_front();
        record = std::move(a.record);
        absorbed = std::move(a.handler);
        got = true;
      } else if (ended_) {
        got = *ended_;  // absorb() found the end: the calls end below
      } else {
        got = next_record_locked(record);
        if (!got) ended_ = got.error();
      }
    }
    if (!got) {
      fail_all(got.error());
      return got.error();
    }
    if (*got) {
      if (absorbed) {
        absorbed(xdr::Parts{record});
      } else {
        deliver(record);
      }
      shelf_.give(std::move(record));
      ++ran;
      continue;
    }
    if (ran > 0) break;
    // Nothing whole yet: wait for the rest (a large reply comes in many reads).
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
  return ran;
}

int TcpClient::wait_fd() { return options_.caller_progress ? fd_.get() : -1; }

bool TcpClient::try_wait() {
  // The socket says what is still to come; what is here already it does not:
  // replies absorbed while sending, bytes read and not parsed, an end.
  std::lock_guard lk(recv_mu_);
  return absorbed_.empty() && !ended_ && !reader_.has_unparsed();
}

rpc::ReplyHandler TcpClient::take_handler(std::span<const std::uint8_t> reply) {
  std::uint32_t xid = 0;
  if (!rpc::peek_xid(reply, xid)) return {};
  std::lock_guard lk(calls_mu_);
  auto it = calls_.find(xid);
  if (it == calls_.end()) {
    spdlog::debug("rpc: reply from {} with unknown xid {:#x} ignored", peer_, xid);
    return {};
  }
  rpc::ReplyHandler h = std::move(it->second);
  calls_.erase(it);
  return h;
}

void TcpClient::deliver(std::span<const std::uint8_t> reply) {
  if (auto h = take_handler(reply)) h(xdr::Parts{reply});
}

}  // namespace nfsrdma::tcp
