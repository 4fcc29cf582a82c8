// A hostile RPC-over-RDMA server against our client: replies that claim more
// of the Write or Reply chunk than the call offered, or segments it never
// offered, are refused (EPROTO) and reported, and never read as data: with a
// bounce buffer, that would hand the caller stale bytes of an earlier call.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "tests/rdma_fixture.hpp"

namespace nfsrdma::test {
namespace {

// Answers each call on one connection with the header `lie` makes from the
// call's, followed by an RPC reply: accepted, NFS3_OK, no attributes, count 0,
// eof, and a zero-length opaque (a READ3resok with its data moved away).
class LyingServer {
 public:
  using Lie = std::function<rpcrdma::Header(const rpcrdma::Header& call)>;

  explicit LyingServer(Lie lie) : lie_(std::move(lie)) {
    auto l = fabric::Listener::listen(test_provider(), test_server_host(), 0);
    if (!l) throw std::runtime_error(l.error().describe());
    listener_ = std::move(*l);
    thread_ = std::thread([this] { serve(); });
  }
  ~LyingServer() {
    stop_ = true;
    listener_->wake();
    if (ep_) ep_->wake();
    thread_.join();
  }
  std::uint16_t port() const { return listener_->port(); }

 private:
  void serve() {
    std::optional<fabric::ConnectRequest> req;
    while (!stop_ && !req) {
      auto r = listener_->wait_request(100);
      if (!r) return;
      req = std::move(*r);
    }
    if (!req) return;
    auto d = listener_->domain_for(*req);
    if (!d) return;
    fabric::Domain& domain = **d;
    mr_ = domain.register_memory(buf_, sizeof buf_, false).value();
    rpcrdma::ConnectPrivate mine;
    mine.send_size = mine.recv_size = 4096;
    auto ep = fabric::Endpoint::accept(domain, req->info.get(), rpcrdma::encode_private(mine), 5000, 16,
                                       [&](fabric::Endpoint& e) { return e.post_recv(&recv_, buf_, 4096, mr_.desc()); });
    if (!ep) return;
    ep_ = std::move(*ep);
    while (!stop_) {
      fabric::Completion c[4];
      auto n = ep_->poll(c, 100);
      if (!n) return;
      for (std::size_t i = 0; i < *n; ++i) {
        if (c[i].context == &recv_ && !c[i].error) answer(c[i].len);
      }
    }
  }

  void answer(std::size_t len) {
    auto d = rpcrdma::decode_header(std::span(buf_, len));
    rpcrdma::Header h = lie_(d.header);
    h.xid = d.header.xid;
    h.credits = 16;
    std::vector<std::uint8_t> out;
    xdr::Encoder e(out);
    rpcrdma::encode_header(e, h);
    for (std::uint32_t w : {d.header.xid, 1u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 1u, 0u}) e.u32(w);
    std::memcpy(buf_ + 4096, out.data(), out.size());
    (void)ep_->post_recv(&recv_, buf_, 4096, mr_.desc());
    (void)ep_->post_send(&send_, buf_ + 4096, out.size(), mr_.desc());
  }

  Lie lie_;
  std::unique_ptr<fabric::Listener> listener_;
  std::unique_ptr<fabric::Endpoint> ep_;
  fabric::MemoryRegion mr_;
  fabric::OpContext recv_{}, send_{};
  std::uint8_t buf_[8192] = {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A READ through an RdmaClient offering a 4 KiB Write chunk; the error, if any.
std::optional<std::string> read_through(std::uint16_t port) {
  rdma::RdmaClientOptions o;
  o.provider = test_provider();
  auto c = rdma::RdmaClient::connect(test_server_host(), port, o);
  if (!c) return "connect: " + c.error().describe();
  std::vector<std::uint8_t> args;
  xdr::encode(args, READ3args{nfs_fh3{}, 0, 4096});
  auto r = rdma_raw(**c, Proc::READ, args, {4096 + 256, 4096});
  (*c)->shutdown();
  if (r) return std::nullopt;
  return r.error().message;
}

rpcrdma::WriteChunk with_length(rpcrdma::WriteChunk c, std::uint32_t length) {
  c.segments[0].length = length;
  return c;
}

TEST(RdmaClientAgainstALyingServer, AnHonestUnusedWriteChunkIsAccepted) {
  LyingServer s([](const rpcrdma::Header& call) {
    rpcrdma::Header h;
    h.write_list.push_back(with_length(call.write_list[0], 0));
    return h;
  });
  EXPECT_EQ(read_through(s.port()), std::nullopt);
}

TEST(RdmaClientAgainstALyingServer, MoreThanTheWriteChunkOfferedIsRefused) {
  LyingServer s([](const rpcrdma::Header& call) {
    rpcrdma::Header h;
    h.write_list.push_back(with_length(call.write_list[0], call.write_list[0].segments[0].length + 4096));
    return h;
  });
  auto err = read_through(s.port());
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("Write chunk beyond what the call offered"), std::string::npos) << *err;
}

TEST(RdmaClientAgainstALyingServer, SegmentsTheCallNeverOfferedAreRefused) {
  for (int variant = 0; variant < 3; ++variant) {
    LyingServer s([variant](const rpcrdma::Header& call) {
      rpcrdma::Header h;
      rpcrdma::WriteChunk w = with_length(call.write_list[0], 16);
      if (variant == 0) w.segments[0].handle ^= 1;     // another memory key
      if (variant == 1) w.segments[0].offset += 4096;  // another place
      if (variant == 2) w.segments.push_back(w.segments[0]);
      h.write_list.push_back(w);
      return h;
    });
    auto err = read_through(s.port());
    ASSERT_TRUE(err) << "variant " << variant;
    EXPECT_NE(err->find("beyond what the call offered"), std::string::npos) << *err;
  }
}

TEST(RdmaClientAgainstALyingServer, AReplyChunkNobodyOfferedIsRefused) {
  LyingServer s([](const rpcrdma::Header& call) {
    rpcrdma::Header h;
    h.write_list.push_back(with_length(call.write_list[0], 0));
    h.reply_chunk = with_length(call.write_list[0], 64);
    return h;
  });
  auto err = read_through(s.port());
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("Reply chunk beyond what the call offered"), std::string::npos) << *err;
}

}  // namespace
}  // namespace nfsrdma::test
