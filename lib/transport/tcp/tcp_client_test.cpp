// TcpClient driven by its caller (TcpClientOptions::caller_progress, as the
// fio engine runs it), against a peer that answers every call in turn; calls
// held to leave together (hold_sends) as the engine's commit holds them.
#include "lib/transport/tcp/tcp_client.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {
namespace {

// One connection, one thread: reads a call, then writes its reply (the
// call's xid and `reply_bytes` more), and reads nothing while it writes, as
// a server that stops reading while its replies wait. A reply the client
// does not take within 3 s ends the connection.
class ReplyingPeer {
 public:
  explicit ReplyingPeer(std::size_t reply_bytes) : reply_bytes_(reply_bytes) {
    auto l = listen_tcp("127.0.0.1", 0);
    EXPECT_TRUE(l.ok());
    listener_ = std::move(*l);
    port_ = local_port(listener_.get());
    thread_ = std::thread([this] { serve(); });
  }
  ~ReplyingPeer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    thread_.join();  // ORDER: before conn_fd_ closes, so its number is not reused under us
  }
  std::uint16_t port() const { return port_; }
  std::size_t replied() const { return replied_; }

 private:
  void serve() {
    conn_fd_ = Fd(::accept(listener_.get(), nullptr, nullptr));
    Fd& c = conn_fd_;
    if (!c.valid()) return;
    conn_ = c.get();
    timeval limit{3, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    RecordReader reader(8u << 20);
    std::vector<std::uint8_t> body(reply_bytes_, 0x7e);
    for (;;) {
      auto parsed = reader.parse();
      if (!parsed) return;
      if (*parsed) {
        auto call = reader.take();
        auto mark = record_mark(static_cast<std::uint32_t>(4 + body.size()));
        iovec iov[3] = {{mark.data(), 4}, {call.data(), 4}, {body.data(), body.size()}};
        if (!send_all(c.get(), iov, 3)) return;  // the client took nothing for 3 s
        ++replied_;
        continue;
      }
      auto buf = reader.buffer();
      ssize_t n = ::recv(c.get(), buf.data(), buf.size(), 0);
      if (n <= 0) return;
      reader.commit(static_cast<std::size_t>(n));
    }
  }

  std::size_t reply_bytes_;
  Fd listener_;
  std::uint16_t port_ = 0;
  Fd conn_fd_;  // the serving thread's
  std::atomic<int> conn_{-1};
  std::atomic<std::size_t> replied_{0};
  std::thread thread_;
};

std::unique_ptr<TcpClient> caller_driven(std::uint16_t port) {
  auto c = TcpClient::connect("127.0.0.1", port, {.reserved_port = false, .caller_progress = true});
  EXPECT_TRUE(c.ok()) << c.error().describe();
  return c ? std::move(*c) : nullptr;
}

TEST(CallerDrivenTcpClient, RepliesRunOnlyInProgressOnTheCallingThread) {
  ReplyingPeer peer(16);
  auto client = caller_driven(peer.port());
  ASSERT_TRUE(client);
  // A message each, kept until its reply (rpc::ClientTransport::call).
  std::vector<std::vector<std::uint8_t>> messages(3, std::vector<std::uint8_t>(40, 0));
  std::size_t ran = 0;
  bool elsewhere = false;
  const auto me = std::this_thread::get_id();
  for (std::uint32_t xid = 1; xid <= 3; ++xid) {
    auto& message = messages[xid - 1];
    message[3] = static_cast<std::uint8_t>(xid);
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{message};
    client->call(call, [&](Result<xdr::Parts> reply) {
      EXPECT_TRUE(reply.ok());
      if (reply) {
        EXPECT_EQ(reply->head.size(), 20u);
      }
      elsewhere |= std::this_thread::get_id() != me;
      ++ran;
    });
  }
  for (int i = 0; i < 500 && peer.replied() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(peer.replied(), 3u);
  EXPECT_EQ(ran, 0u) << "a reply ran outside progress()";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ran < 3 && std::chrono::steady_clock::now() < until) ASSERT_TRUE(client->progress(100).ok());
  EXPECT_EQ(ran, 3u);
  EXPECT_FALSE(elsewhere);
}

// Calls numbered first..first+n-1, each message 40 bytes whose first word is
// its xid; every reply counted in `ran`.
void make_calls(TcpClient& client, std::vector<std::vector<std::uint8_t>>& messages, std::uint32_t first,
                std::size_t n, std::size_t& ran) {
  for (std::size_t i = 0; i < n; ++i) {
    auto& m = messages.emplace_back(40, 0);
    const std::uint32_t xid = first + static_cast<std::uint32_t>(i);
    m[2] = static_cast<std::uint8_t>(xid >> 8);
    m[3] = static_cast<std::uint8_t>(xid);
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{m};
    client.call(call, [&ran](Result<xdr::Parts> reply) {
      EXPECT_TRUE(reply.ok());
      ++ran;
    });
  }
}

bool peer_replied(const ReplyingPeer& peer, std::size_t n) {
  for (int i = 0; i < 500 && peer.replied() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return peer.replied() >= n;
}

TEST(CallerDrivenTcpClient, HeldCallsLeaveWhenTheHoldEndsOrFillsABatch) {
  ReplyingPeer peer(16);
  auto client = caller_driven(peer.port());
  ASSERT_TRUE(client);
  std::vector<std::vector<std::uint8_t>> messages;
  messages.reserve(100);  // each kept, unmoved, until its reply
  std::size_t ran = 0;
  client->hold_sends();
  make_calls(*client, messages, 1, 3, ran);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(peer.replied(), 0u) << "a held call was sent before send_held()";
  client->send_held();
  ASSERT_TRUE(peer_replied(peer, 3));
  // A hold keeps at most 64: the 64th sends them, the 65th waits.
  client->hold_sends();
  make_calls(*client, messages, 4, 65, ran);
  ASSERT_TRUE(peer_replied(peer, 3 + 64));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(peer.replied(), 3u + 64) << "the 65th held call was sent before send_held()";
  client->send_held();
  ASSERT_TRUE(peer_replied(peer, 3 + 65));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ran < 68 && std::chrono::steady_clock::now() < until) ASSERT_TRUE(client->progress(100).ok());
  EXPECT_EQ(ran, 68u);
}

TEST(CallerDrivenTcpClient, ProgressSendsWhatAHoldKept) {
  ReplyingPeer peer(16);
  auto client = caller_driven(peer.port());
  ASSERT_TRUE(client);
  std::vector<std::vector<std::uint8_t>> messages;
  messages.reserve(2);
  std::size_t ran = 0;
  client->hold_sends();
  make_calls(*client, messages, 1, 2, ran);
  // Waiting for replies to calls still held would wait for ever.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ran < 2 && std::chrono::steady_clock::now() < until) ASSERT_TRUE(client->progress(100).ok());
  EXPECT_EQ(ran, 2u);
  client->send_held();
}

// A connection that ends while calls are held fails them, and their callers
// may free the messages at once: the hold's end then sends nothing.
TEST(CallerDrivenTcpClient, HeldCallsOfAConnectionThatEndedFailAndAreNotSent) {
  ReplyingPeer peer(16);
  auto client = caller_driven(peer.port());
  ASSERT_TRUE(client);
  std::vector<std::unique_ptr<std::vector<std::uint8_t>>> messages;
  messages.reserve(3);  // each callback holds its own entry
  std::size_t failed = 0;
  client->hold_sends();
  for (std::uint32_t xid = 1; xid <= 3; ++xid) {
    auto& m = messages.emplace_back(std::make_unique<std::vector<std::uint8_t>>(40, 0));
    (*m)[3] = static_cast<std::uint8_t>(xid);
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{*m};
    client->call(call, [&failed, &m](Result<xdr::Parts> reply) {
      EXPECT_FALSE(reply.ok());
      ++failed;
      m.reset();  // the caller's memory goes once its call has ended
    });
  }
  client->shutdown();
  EXPECT_EQ(failed, 3u);
  client->send_held();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(peer.replied(), 0u);
}

// 32 calls of 1 MiB, sent one after another without a progress() between
// them, each answered with 1 MiB: the replies fill our socket while we
// still send, and the peer stops reading until they are taken. A client
// that only waited for room to send would wait for the peer as it waits
// for us (here, until the peer gives up and the calls fail).
TEST(CallerDrivenTcpClient, ASendThatFindsTheSocketFullTakesTheRepliesMeanwhile) {
  constexpr std::size_t kCalls = 32, kBytes = 1u << 20;
  ReplyingPeer peer(kBytes);
  auto client = caller_driven(peer.port());
  ASSERT_TRUE(client);
  // A head each, kept until its reply (rpc::ClientTransport::call).
  std::vector<std::vector<std::uint8_t>> heads(kCalls, std::vector<std::uint8_t>(40, 0));
  std::vector<std::uint8_t> payload(kBytes, 0x11);
  std::size_t ok = 0, failed = 0;
  for (std::uint32_t xid = 1; xid <= kCalls; ++xid) {
    auto& head = heads[xid - 1];
    head[2] = static_cast<std::uint8_t>(xid >> 8);
    head[3] = static_cast<std::uint8_t>(xid);
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = {head, payload, {}};
    client->call(call, [&](Result<xdr::Parts> reply) {
      (reply && reply->head.size() == 4 + kBytes ? ok : failed)++;
    });
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ok + failed < kCalls && std::chrono::steady_clock::now() < until) {
    if (!client->progress(100)) break;
  }
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(failed, 0u);
}

// The peer answers the first call, stops reading, and resets the connection
// while our second (16 MiB) call waits for room: the reply read meanwhile
// is still delivered, and the waiting call fails for a reconnect.
TEST(CallerDrivenTcpClient, AConnectionLostWhileASendWaitsKeepsTheRepliesReadMeanwhile) {
  auto l = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  const int small = 64 * 1024;  // inherited by the connection: our 16 MiB cannot fit, whatever the host's defaults
  ::setsockopt(l->get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::thread peer([&] {
    Fd c(::accept(l->get(), nullptr, nullptr));
    RecordReader reader(1u << 20);
    for (;;) {
      auto parsed = reader.parse();
      if (!parsed) return;
      if (*parsed) break;
      auto buf = reader.buffer();
      ssize_t n = ::recv(c.get(), buf.data(), buf.size(), 0);
      if (n <= 0) return;
      reader.commit(static_cast<std::size_t>(n));
    }
    auto call = reader.take();
    auto mark = record_mark(4);
    iovec iov[2] = {{mark.data(), 4}, {call.data(), 4}};
    if (!send_all(c.get(), iov, 2)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    linger reset{1, 0};  // a reset, not an orderly close
    ::setsockopt(c.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  });
  auto client = caller_driven(local_port(l->get()));
  ASSERT_TRUE(client);
  std::vector<std::uint8_t> head(40, 0), payload(16u << 20, 0x22);
  std::optional<bool> first;  // whether the first call got its reply
  std::optional<Error> second;
  rpc::OutgoingCall call;
  head[3] = 1;
  call.xid = 1;
  call.message = xdr::Parts{head};
  client->call(call, [&](Result<xdr::Parts> r) { first = r.ok(); });
  head[3] = 2;
  call.xid = 2;
  call.message = {head, payload, {}};
  client->call(call, [&](Result<xdr::Parts> r) {
    if (!r) second = r.error();
  });
  peer.join();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!first || !second) && std::chrono::steady_clock::now() < until) (void)client->progress(100);
  ASSERT_TRUE(first.has_value()) << "the reply read while the send waited was lost";
  EXPECT_TRUE(*first) << "it failed instead";
  ASSERT_TRUE(second.has_value()) << "the waiting call never ended";
  EXPECT_EQ(second->action, Action::reconnect);
}

TEST(CallerDrivenTcpClient, ALostConnectionFailsTheCallsInProgress) {
  auto peer = std::make_unique<ReplyingPeer>(16);
  auto client = caller_driven(peer->port());
  ASSERT_TRUE(client);
  const std::vector<std::uint8_t> m(40, 0);  // kept until the replies (rpc::ClientTransport::call)
  for (int i = 0; i < 100 && peer->replied() == 0; ++i) {
    // Wait for the peer's accept by a round trip.
    rpc::OutgoingCall call;
    call.xid = 1000 + static_cast<std::uint32_t>(i);
    call.message = xdr::Parts{m};
    client->call(call, [](Result<xdr::Parts>) {});
    (void)client->progress(10);
  }
  std::vector<std::uint8_t> message(40, 0);
  message[3] = 9;
  rpc::OutgoingCall call;
  call.xid = 9;
  call.message = xdr::Parts{message};
  std::optional<Error> why;
  peer.reset();  // closes the connection: nothing answers call 9
  client->call(call, [&](Result<xdr::Parts> reply) {
    if (!reply) why = reply.error();
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!why && std::chrono::steady_clock::now() < until) (void)client->progress(100);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->action, Action::reconnect);
  EXPECT_FALSE(client->progress(0).ok()) << "progress() on a lost connection says so";
}

}  // namespace
}  // namespace nfsrdma::tcp
