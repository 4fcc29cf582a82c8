// TcpServer against a peer that misbehaves in ways a test can time exactly.
#include "lib/transport/tcp/tcp_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"

namespace nfsrdma::tcp {
namespace {

bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 200 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

// Answers `call` with `size` bytes of `fill`.
void answer(rpc::IncomingCall& call, std::size_t size, std::uint8_t fill) {
  rpc::ReplyMessage reply;
  reply.bytes.assign(size, fill);
  call.channel->send(std::move(reply));
}

// Listens on a loopback port, runs `server` on `loop`, and connects to it.
Result<Fd> start_and_connect(TcpServer& server, std::thread& loop) {
  auto port = server.add_listener("127.0.0.1", 0, 0);
  if (!port) return port.error();
  loop = std::thread([&server] { server.run(); });
  return connect_tcp("127.0.0.1", *port, false);
}

// A reply whose send fails (the client reset the connection meanwhile) ends
// the connection as the client's hang-up would: it leaves the server's table
// and its admission slot, so neither its memory nor its place is held for
// good (before, the failed send closed the socket behind the event loop's
// back, which then never saw the hang-up: the connection stayed counted).
TEST(TcpServer, AReplyThatCannotBeSentEndsTheConnection) {
  std::promise<void> called, reset;
  auto reset_done = reset.get_future().share();
  TcpServer server({}, [&](rpc::IncomingCall&& call) {
    called.set_value();
    reset_done.wait();  // on the event loop: it sees nothing until the reply is tried
    answer(call, 64, 0);
  });
  std::thread loop;
  auto fd = start_and_connect(server, loop);
  ASSERT_TRUE(fd.ok()) << fd.error().describe();
  const std::uint8_t body[8] = {};
  const auto mark = record_mark(sizeof body);
  ASSERT_EQ(::send(fd->get(), mark.data(), mark.size(), 0), 4);
  ASSERT_EQ(::send(fd->get(), body, sizeof body, 0), 8);
  ASSERT_EQ(called.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(server.connection_count(), 1u);
  linger hard{1, 0};  // close with a reset
  ::setsockopt(fd->get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  fd->reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  reset.set_value();

  EXPECT_TRUE(eventually([&] { return server.connection_count() == 0; }))
      << "connections still counted: " << server.connection_count();
  server.stop();
  loop.join();
}

// Sends one record of `body` on `fd`.
void send_record(int fd, std::uint8_t body) {
  const std::uint8_t bytes[8] = {body};
  const auto mark = record_mark(sizeof bytes);
  ASSERT_EQ(::send(fd, mark.data(), mark.size(), 0), 4);
  ASSERT_EQ(::send(fd, bytes, sizeof bytes, 0), 8);
}

// Reads one reply record of 8 bytes from `fd`; its first byte.
int reply_from(int fd) {
  std::uint8_t bytes[12];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::recv(fd, bytes + got, sizeof bytes - got, 0);
    if (n <= 0) return -1;
    got += static_cast<std::size_t>(n);
  }
  return bytes[4];
}

// Sends `calls` calls of `bytes` (the first byte numbering them) with one
// send, to a server that answers each; returns how many found replies to
// the ones before already in the client's socket when they ran. The client
// reads the replies, checking their order, once the last call has run.
int calls_that_found_replies_sent(int calls, std::size_t bytes = 8) {
  std::atomic<int> client_fd{-1};
  std::atomic<int> ran{0}, found{0};
  TcpServer server({}, [&](rpc::IncomingCall&& call) {
    const int n = ran++;
    // The first send's bytes reach the client's socket by the next call but
    // for a softirq deferred to its thread: waited for once.
    if (n == 16) {
      pollfd p{client_fd.load(), POLLIN, 0};
      ::poll(&p, 1, 2000);
    }
    int waiting = 0;
    if (n > 0 && ::ioctl(client_fd.load(), FIONREAD, &waiting) == 0 && waiting > 0) ++found;
    answer(call, 8, call.message.head[0]);
  });
  std::thread loop;
  auto fd = start_and_connect(server, loop);
  EXPECT_TRUE(fd.ok()) << fd.error().describe();
  if (!fd) return -1;
  client_fd = fd->get();
  std::vector<std::uint8_t> batch;
  for (int i = 0; i < calls; ++i) {
    const auto mark = record_mark(static_cast<std::uint32_t>(bytes));
    batch.insert(batch.end(), mark.begin(), mark.end());
    batch.push_back(static_cast<std::uint8_t>(i));
    batch.insert(batch.end(), bytes - 1, 0);
  }
  EXPECT_EQ(::send(fd->get(), batch.data(), batch.size(), 0), static_cast<ssize_t>(batch.size()));
  for (int i = 0; i < 500 && ran.load() < calls; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(ran.load(), calls);
  for (int i = 0; i < calls; ++i) EXPECT_EQ(reply_from(fd->get()), i);
  server.stop();
  loop.join();
  return found.load();
}

// The replies to the calls of one received batch wait for the batch's end
// and leave in one send: one syscall and one wake of the client for the
// batch, not one per call. 15 is fewer than a send's most.
TEST(TcpServer, RepliesToTheCallsOfOneReceivedBatchLeaveTogether) {
  EXPECT_EQ(calls_that_found_replies_sent(15), 0) << "replies left one by one while their batch ran";
}

// Calls of 4 KiB (WRITE-sized): a recv brings a few and fills its buffer,
// so more are in the socket; the replies wait for theirs rather than take a
// sendmsg per recv.
TEST(TcpServer, RepliesWaitForTheCallsAFullReceiveLeftInTheSocket) {
  EXPECT_EQ(calls_that_found_replies_sent(8, 4100), 0) << "the replies of a full recv's calls left before the rest";
}

// A batch larger than a send's most (16 replies) has its first replies sent
// while the server makes the rest: a client that sent its calls together
// starts on them meanwhile. Each call after the 16th finds them.
TEST(TcpServer, ABatchLargerThanASendsMostSendsItsFirstRepliesWhileTheRestRun) {
  EXPECT_EQ(calls_that_found_replies_sent(40), 40 - 16) << "the first 16 replies waited for the rest";
}

// A record that arrives in pieces, each after the loop read the socket
// empty (a short recv, after which it waits in epoll rather than reading
// again), is read whole when its last piece comes, and the one after it too.
TEST(TcpServer, ACallArrivingInPiecesAfterTheSocketWasReadEmptyIsRead) {
  std::atomic<int> calls{0};
  TcpServer server({}, [&](rpc::IncomingCall&& call) {
    ++calls;
    answer(call, 8, call.message.head[0]);
  });
  std::thread loop;
  auto fd = start_and_connect(server, loop);
  ASSERT_TRUE(fd.ok()) << fd.error().describe();
  std::vector<std::uint8_t> record;
  const auto mark = record_mark(8);
  record.insert(record.end(), mark.begin(), mark.end());
  record.push_back(7);
  record.insert(record.end(), 7, 0);
  for (std::size_t at : {std::size_t{0}, std::size_t{2}, std::size_t{6}}) {
    const std::size_t end = at == 6 ? record.size() : (at == 0 ? 2 : 6);
    ASSERT_EQ(::send(fd->get(), record.data() + at, end - at, 0), static_cast<ssize_t>(end - at));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_EQ(reply_from(fd->get()), 7);
  record[4] = 8;
  ASSERT_EQ(::send(fd->get(), record.data(), record.size(), 0), static_cast<ssize_t>(record.size()));
  EXPECT_EQ(reply_from(fd->get()), 8);
  EXPECT_EQ(calls.load(), 2);
  server.stop();
  loop.join();
}

// A reply whose payload is in a pipe (READ data spliced from a file) goes
// as one record: its bytes, the pipe's contents, their XDR padding, and the
// next reply after it. Payloads more than the socket takes at once (several
// MiB unread, into a small receive window) go in parts, the rest at
// EPOLLOUT. A connection that does not read holds 4 pipes at most (its
// other calls get none and copy); the pipes go back to the pool, empty.
TEST(TcpServer, APipedPayloadFollowsItsReplysBytesInOneRecord) {
  constexpr int kCalls = 12;
  std::atomic<PipePool*> pool{nullptr};
  std::atomic<std::size_t> payload_length{0}, most_lent{0};
  std::atomic<int> piped{0};
  auto pattern = [](int id, std::size_t i) { return static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(id)); };
  TcpServer server({}, [&](rpc::IncomingCall&& call) {
    rpc::ReplyMessage reply;
    const int id = call.message.head[0];
    reply.bytes.assign(8, static_cast<std::uint8_t>(id));
    if (id <= kCalls) {
      if (call.pipes) pool = call.pipes;
      PipePool* p = pool.load();
      payload_length = p ? p->capacity() - 1 : 0;  // odd: one byte of padding
      std::vector<std::uint8_t> data(payload_length);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(id, i);
      if (call.pipes) reply.pipe = call.pipes->take();
      if (reply.pipe) {
        ++piped;
        most_lent = std::max(most_lent.load(), call.pipes->lent());
        std::size_t put = 0;
        while (put < data.size()) {
          ssize_t n = ::write(reply.pipe.write_end(), data.data() + put, data.size() - put);
          if (n <= 0) break;
          put += static_cast<std::size_t>(n);
        }
        reply.pipe.filled(put);
      } else {  // copied, as a READ with no pipe lent is
        reply.bytes.insert(reply.bytes.end(), data.begin(), data.end());
        reply.bytes.push_back(0);
      }
    }
    call.channel->send(std::move(reply));
  });
  auto port = server.add_listener("127.0.0.1", 0, 0);
  ASSERT_TRUE(port.ok()) << port.error().describe();
  std::thread loop([&server] { server.run(); });
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int window = 16 * 1024;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &window, sizeof window);
  timeval wait{5, 0};  // a reply that never comes fails the test, not hangs it
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(*port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
  for (int id = 1; id <= kCalls + 1; ++id) send_record(fd.get(), static_cast<std::uint8_t>(id));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the socket fills: the rest waits for EPOLLOUT
  auto read_exactly = [&](std::size_t n) {
    std::vector<std::uint8_t> out(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd.get(), out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  };
  for (int id = 1; id <= kCalls; ++id) {
    auto mark = read_exactly(4);
    ASSERT_EQ(mark.size(), 4u);
    const std::uint32_t length = (std::uint32_t{mark[0]} << 24 | std::uint32_t{mark[1]} << 16 |
                                  std::uint32_t{mark[2]} << 8 | mark[3]) & 0x7fffffff;
    ASSERT_EQ(length, 8 + payload_length + 1);
    auto record = read_exactly(length);
    ASSERT_EQ(record.size(), length);
    EXPECT_EQ(std::vector<std::uint8_t>(record.begin(), record.begin() + 8), std::vector<std::uint8_t>(8, id));
    bool same = true;
    for (std::size_t i = 0; i < payload_length; ++i) same = same && record[8 + i] == pattern(id, i);
    EXPECT_TRUE(same) << "reply " << id << ": the payload arrived changed";
    EXPECT_EQ(record.back(), 0) << "padding";
  }
  EXPECT_EQ(reply_from(fd.get()), kCalls + 1) << "the next reply, after the piped ones";
  EXPECT_GE(piped.load(), 1);
  EXPECT_LE(most_lent.load(), 4u) << "one connection held more of the server's pipes than its share";
  EXPECT_TRUE(eventually([&] { return pool.load()->lent() == 0; }));
  server.stop();
  loop.join();
}

// Connections are spread over the loops, one per core by default, and a call
// that waits on one loop (an inline WRITE throttled by the page cache) holds
// up only that loop's connections: here the first connection's call waits
// until the second's has been handled, which with one loop for both never
// comes (its record is never read while the loop waits).
TEST(TcpServer, ACallThatWaitsOnOneLoopHoldsUpNoConnectionOnAnother) {
  std::promise<void> second_handled;
  auto second_done = second_handled.get_future().share();
  std::atomic<bool> first_saw_second{false};
  TcpServerOptions options;
  options.loops = 2;
  TcpServer server(options, [&](rpc::IncomingCall&& call) {
    const std::uint8_t which = call.message.head[0];
    if (which == 1) {
      first_saw_second = second_done.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
    } else {
      second_handled.set_value();
    }
    answer(call, 8, which);
  });
  auto port = server.add_listener("127.0.0.1", 0, 0);
  ASSERT_TRUE(port.ok()) << port.error().describe();
  std::thread loops([&] { server.run(); });

  auto first = connect_tcp("127.0.0.1", *port, false);
  auto second = connect_tcp("127.0.0.1", *port, false);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(eventually([&] { return server.connection_count() == 2; }));
  send_record(first->get(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  send_record(second->get(), 2);
  EXPECT_EQ(reply_from(second->get()), 2);
  EXPECT_EQ(reply_from(first->get()), 1);
  EXPECT_TRUE(first_saw_second) << "the second connection's call waited for the first's";
  server.stop();
  loops.join();
}

}  // namespace
}  // namespace nfsrdma::tcp
