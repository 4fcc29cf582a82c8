// NFSv3 over RPC-over-RDMA end to end: the real nfsrdma-server on libfabric's
// tcp provider, our RdmaClient, and hand-made transport headers for the
// errors. MOUNT stays on TCP (RFC 8267), as with a kernel client.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "lib/transport/rdma/rdma_client.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

struct Sizes {
  std::uint32_t reply_max = 0, reply_payload_max = 0;
  bool split_payload = false;  // the last opaque of the arguments is the DDP-eligible item
  std::uint32_t payload_bytes = 0;
};

Result<std::vector<std::uint8_t>> rdma_raw(rpc::ClientTransport& t, Proc proc, const std::vector<std::uint8_t>& args,
                                           Sizes sz) {
  std::uint32_t xid = rpc::next_xid();
  std::vector<std::uint8_t> msg = make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(proc), args);
  rpc::OutgoingCall call;
  call.xid = xid;
  call.reply_max_bytes = sz.reply_max;
  call.reply_payload_max = sz.reply_payload_max;
  if (sz.split_payload) {
    std::size_t data_at = msg.size() - xdr::pad4(sz.payload_bytes);
    call.message = std::span(msg).first(data_at);
    call.payload = std::span(msg).subspan(data_at, sz.payload_bytes);
  } else {
    call.message = msg;
  }
  auto promise = std::make_shared<std::promise<Result<std::vector<std::uint8_t>>>>();
  auto fut = promise->get_future();
  t.call(call, [promise, xid](Result<std::span<const std::uint8_t>> reply) {
    if (!reply) return promise->set_value(reply.error());
    xdr::Decoder d(*reply);
    if (auto r = rpc::check_reply(d, xid); !r) return promise->set_value(r.error());
    auto rest = d.rest();
    promise->set_value(std::vector<std::uint8_t>(rest.begin(), rest.end()));
  });
  if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "no reply in 10 s"};
  }
  return fut.get();
}

class OverRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    // A short RMA deadline, so hostile chunks are dealt with within the test.
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{dir_.path() + " 127.0.0.1(rw,no_root_squash)"},
                                              std::vector<std::string>{"--rdma-timeout", "1"});
    Client tcp(*server_);
    root_ = tcp.mount_root(dir_.path());
    rdma::RdmaClientOptions o;
    o.provider = "tcp";
    auto c = rdma::RdmaClient::connect("127.0.0.1", server_->rdma_port(), o);
    ASSERT_TRUE(c.ok()) << c.error().describe() << "\n" << server_->log();
    rdma_ = std::move(*c);
  }
  void TearDown() override {
    if (rdma_) rdma_->shutdown();
    if (server_ && HasFailure()) std::cerr << "server log:\n" << server_->log();
  }

  template <class Res, class Args>
  Res call(Proc proc, const Args& args, Sizes sz = {}) {
    std::vector<std::uint8_t> a;
    xdr::encode(a, args);
    auto bytes = rdma_raw(*rdma_, proc, a, sz);
    if (!bytes) throw std::runtime_error(bytes.error().describe());
    replies_.push_back(std::move(*bytes));
    Res r;
    if (auto d = xdr::decode(replies_.back(), r); !d) throw std::runtime_error(d.error().describe());
    return r;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<rdma::RdmaClient> rdma_;
  nfs_fh3 root_;
  std::vector<std::vector<std::uint8_t>> replies_;
};

TEST_F(OverRdma, NullAndGetattr) {
  EXPECT_EQ(rdma_->credits(), 1u);  // RFC 8166 §3.3.1: one call until the server grants more
  auto n = rdma_raw(*rdma_, Proc::NULL_, {}, {});
  ASSERT_TRUE(n.ok()) << n.error().describe();
  EXPECT_EQ(rdma_->credits(), 128u);
  auto g = call<GETATTR3res>(Proc::GETATTR, FhArgs{root_});
  ASSERT_EQ(g.status, NFS3_OK);
  EXPECT_EQ(g.obj_attributes.type, NF3DIR);
  EXPECT_EQ(rdma_->peer_inline_receive(), 4096u);
}

TEST_F(OverRdma, OneMebibyteWriteByReadChunkAndReadByWriteChunk) {
  CREATE3args c;
  c.where = {root_, "big"};
  c.obj_attributes.mode = 0644;
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 65536);
  WRITE3args w{*cr.obj, 0, 1u << 20, stable_how::FILE_SYNC,
               {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}};
  auto wr = call<WRITE3res>(Proc::WRITE, w, {0, 0, true, 1u << 20});
  ASSERT_EQ(wr.status, NFS3_OK);
  EXPECT_EQ(wr.count, 1u << 20);
  std::ifstream disk(dir_.path() + "/big", std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(disk)), {});
  EXPECT_TRUE(on_disk == data) << "data written over RDMA differs on disk";
  auto rd = call<READ3res>(Proc::READ, READ3args{*cr.obj, 0, 1u << 20}, {(1u << 20) + 256, 1u << 20});
  ASSERT_EQ(rd.status, NFS3_OK);
  EXPECT_EQ(rd.count, 1u << 20);
  EXPECT_TRUE(rd.eof);
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(rd.data.data()), rd.data.size()) == data);
  // A short read: the server fills less of the Write chunk than offered.
  auto tail = call<READ3res>(Proc::READ, READ3args{*cr.obj, (1u << 20) - 10, 4096}, {4096 + 256, 4096});
  ASSERT_EQ(tail.status, NFS3_OK);
  EXPECT_EQ(tail.count, 10u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(tail.data.data()), tail.data.size()), data.substr(data.size() - 10));
  // At end of file the Write chunk goes unused and comes back with length 0.
  auto past = call<READ3res>(Proc::READ, READ3args{*cr.obj, 2u << 20, 4096}, {4096 + 256, 4096});
  ASSERT_EQ(past.status, NFS3_OK);
  EXPECT_EQ(past.count, 0u);
  EXPECT_TRUE(past.eof);
}

TEST_F(OverRdma, ReplyChunkTooSmallIsErrChunkNeverATruncatedReply) {
  for (int i = 0; i < 2000; ++i) std::ofstream(dir_.path() + "/entry-with-a-longish-name-" + std::to_string(i));
  std::vector<std::uint8_t> args;
  xdr::encode(args, READDIR3args{root_, 0, {}, 65536});
  auto r = rdma_raw(*rdma_, Proc::READDIR, args, {8192, 0});  // offers 8 KiB for up to 64 KiB
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ERR_CHUNK"), std::string::npos) << r.error().message;
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);  // the connection lives on
}

TEST_F(OverRdma, ReaddirOf5000EntriesThroughTheReplyChunk) {
  std::filesystem::create_directory(dir_.path() + "/many");
  for (int i = 0; i < 5000; ++i) std::ofstream(dir_.path() + "/many/file-" + std::to_string(i));
  Client tcp(*server_);
  nfs_fh3 dir = tcp.lookup(root_, "many");
  std::set<std::string> seen;
  READDIR3args a{dir, 0, {}, 65536};
  int rounds = 0;
  for (;;) {
    auto r = call<READDIR3res>(Proc::READDIR, a, {65536 + 1024, 0});  // count bounds READDIR3res; the RPC header comes on top
    ASSERT_EQ(r.status, NFS3_OK);
    for (const auto& e : r.entries) seen.insert(e.name);
    ++rounds;
    if (r.eof) break;
    a.cookie = r.entries.back().cookie;
    a.cookieverf = r.cookieverf;
  }
  EXPECT_EQ(seen.size(), 5002u);
  EXPECT_LT(rounds, 10);  // 64 KiB replies: far over the inline threshold
}

TEST_F(OverRdma, CallOverTheInlineThresholdGoesAsNomsg) {
  std::string target(4000, 'x');
  SYMLINK3args s;
  s.where = {root_, "long-link"};
  s.symlink_data = target;
  auto r = call<CreateRes>(Proc::SYMLINK, s);  // ~4.1 KiB of arguments, no DDP payload
  ASSERT_EQ(r.status, NFS3_OK);
  auto rl = call<READLINK3res>(Proc::READLINK, FhArgs{*r.obj}, {8192, 0});
  ASSERT_EQ(rl.status, NFS3_OK);
  EXPECT_EQ(rl.data, target);
  EXPECT_EQ(std::filesystem::read_symlink(dir_.path() + "/long-link").string(), target);
}

TEST_F(OverRdma, ManyCallsStayWithinTheGrantedCredits) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, FhArgs{root_});
  std::mutex mu;
  std::condition_variable cv;
  int left = 300, failures = 0;
  std::vector<std::vector<std::uint8_t>> msgs;
  msgs.reserve(300);
  for (int i = 0; i < 300; ++i) {
    std::uint32_t xid = rpc::next_xid();
    msgs.push_back(make_call(xid, kProgram, kVersion, 1, args));
    rpc::OutgoingCall c;
    c.xid = xid;
    c.message = msgs.back();
    rdma_->call(c, [&, xid](Result<std::span<const std::uint8_t>> reply) {
      bool ok = reply.ok();
      if (ok) {
        xdr::Decoder d(*reply);
        GETATTR3res g;
        ok = rpc::check_reply(d, xid).ok() && xdr::decode(d, g).ok() && g.status == NFS3_OK;
      }
      std::lock_guard lk(mu);
      if (!ok) ++failures;
      if (--left == 0) cv.notify_all();
    });
  }
  std::unique_lock lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return left == 0; }));
  EXPECT_EQ(failures, 0);
  EXPECT_LE(rdma_->max_in_flight_seen(), 128u);
  EXPECT_GT(rdma_->max_in_flight_seen(), 1u);
}

// Caller memory registered once: WRITE data goes out as a Read chunk pointing
// at it and READ data lands in it by RDMA Write; no bounce buffer is touched.
TEST_F(OverRdma, RegisteredCallerMemoryMovesWithoutCopies) {
  std::vector<std::uint8_t> region(2 << 20);
  ASSERT_TRUE(rdma_->register_memory(region).ok());
  auto src = std::span(region).first(1 << 20);
  auto dst = std::span(region).subspan(1 << 20);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 5 + 1);
  CREATE3args c;
  c.where = {root_, "zc"};
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  const std::uint64_t bounce_before = rdma_->bounce_bytes();
  // WRITE: header and arguments up to the data's length word, then the data in place.
  std::vector<std::uint8_t> head;
  xdr::Encoder e(head);
  std::uint32_t xid = rpc::next_xid();
  rpc::AuthSys root;
  rpc::encode_call_header(e, xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::WRITE), root);
  codec(e, *cr.obj);
  e.u64(0);
  e.u32(1u << 20);
  e.enumeration(stable_how::FILE_SYNC);
  e.u32(1u << 20);
  rpc::OutgoingCall w;
  w.xid = xid;
  w.message = head;
  w.payload = src;
  auto wrote = std::make_shared<std::promise<bool>>();
  rdma_->call(w, [wrote, xid](Result<std::span<const std::uint8_t>> r) {
    xdr::Decoder d(r ? *r : std::span<const std::uint8_t>{});
    WRITE3res res;
    wrote->set_value(r.ok() && rpc::check_reply(d, xid).ok() && xdr::decode(d, res).ok() && res.status == NFS3_OK);
  });
  ASSERT_TRUE(wrote->get_future().get());
  // READ into the other half of the region.
  std::vector<std::uint8_t> args;
  xdr::encode(args, READ3args{*cr.obj, 0, 1u << 20});
  std::uint32_t rxid = rpc::next_xid();
  auto msg = make_call(rxid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::READ), args);
  rpc::OutgoingCall r;
  r.xid = rxid;
  r.message = msg;
  r.reply_max_bytes = (1u << 20) + 1024;
  r.reply_payload_max = 1u << 20;
  r.reply_payload = dst;
  auto read = std::make_shared<std::promise<std::pair<std::uint32_t, std::size_t>>>();
  rdma_->call(r, [read, rxid](Result<std::span<const std::uint8_t>> reply) {
    // The reply is reduced: status, attributes, count, eof, length, and no data.
    xdr::Decoder d(reply ? *reply : std::span<const std::uint8_t>{});
    nfsstat3 st{};
    post_op_attr attrs;
    std::uint32_t count = 0, len = 0;
    bool eof = false;
    if (reply && rpc::check_reply(d, rxid).ok()) {
      d.enumeration(st);
      xdr::xdr_optional(d, attrs);
      d.u32(count);
      d.boolean(eof);
      d.u32(len);
    }
    read->set_value({d.ok() && st == NFS3_OK ? len : 0, d.remaining()});
  });
  auto [len, left] = read->get_future().get();
  EXPECT_EQ(len, 1u << 20);
  EXPECT_EQ(left, 0u);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  EXPECT_EQ(rdma_->bounce_bytes(), bounce_before);  // nothing went through a bounce buffer
}

// Hand-made transport headers straight over lib/fabric.
class RawRdma {
 public:
  explicit RawRdma(std::uint16_t port) {
    auto info = fabric::get_info("tcp", "127.0.0.1", std::to_string(port), false);
    if (!info) throw std::runtime_error(info.error().describe());
    info_ = std::move(*info);
    domain_ = fabric::Domain::open(info_.get()).value();
    mr_ = domain_->register_memory(buf_, sizeof buf_, true).value();
    std::vector<std::uint8_t> theirs;
    auto priv = rpcrdma::encode_private({});
    auto ep = fabric::Endpoint::connect(*domain_, info_.get(), priv, theirs, 5000, 16, [&](fabric::Endpoint& e) {
      return e.post_recv(&recv_ctx_, buf_, 4096, mr_.desc());
    });
    if (!ep) throw std::runtime_error(ep.error().describe());
    ep_ = std::move(*ep);
  }
  // Sends `msg` without waiting for anything.
  void send(const std::vector<std::uint8_t>& msg) {
    std::memcpy(buf_ + 4096, msg.data(), msg.size());
    if (!ep_->post_send(&send_ctx_, buf_ + 4096, msg.size(), mr_.desc())) throw std::runtime_error("send");
  }
  // Sends `msg` and returns the decoded reply header.
  rpcrdma::Header exchange(const std::vector<std::uint8_t>& msg) {
    send(msg);
    for (int i = 0; i < 50; ++i) {
      fabric::Completion c[4];
      auto n = ep_->poll(c, 100);
      if (!n) throw std::runtime_error(n.error().describe());
      for (std::size_t k = 0; k < *n; ++k) {
        if (c[k].context == &recv_ctx_) {
          auto d = rpcrdma::decode_header(std::span(buf_, c[k].len));
          std::memset(buf_, 0, 4096);
          if (!ep_->post_recv(&recv_ctx_, buf_, 4096, mr_.desc())) throw std::runtime_error("recv");
          return d.header;
        }
      }
    }
    throw std::runtime_error("no reply");
  }

 private:
  fabric::Info info_;
  std::unique_ptr<fabric::Domain> domain_;
  fabric::MemoryRegion mr_;
  std::unique_ptr<fabric::Endpoint> ep_;
  fabric::OpContext recv_ctx_{}, send_ctx_{};
  std::uint8_t buf_[8192] = {};
};

std::vector<std::uint8_t> raw_header(std::uint32_t xid, std::uint32_t vers, std::uint32_t proc,
                                     std::vector<std::uint32_t> rest) {
  std::vector<std::uint8_t> out;
  xdr::Encoder e(out);
  e.u32(xid);
  e.u32(vers);
  e.u32(1);
  e.u32(proc);
  for (auto w : rest) e.u32(w);
  return out;
}

// Clients that die in the middle of a WRITE (here: their Read chunk cannot be
// read) must not keep the server's shared payload buffers: more such clients
// than there are buffers, then a well-behaved 1 MiB WRITE still goes through.
TEST_F(OverRdma, ClientsDyingMidWriteDoNotLeakPayloadBuffers) {
  for (int i = 0; i < 80; ++i) {  // the server has 64 payload buffers
    RawRdma raw(server_->rdma_port());
    std::vector<std::uint8_t> msg = raw_header(0x1000u + static_cast<std::uint32_t>(i), 1, 0, {1, 136, 0xbad0000u + static_cast<std::uint32_t>(i), 65536, 0, 0x1000, 0, 0, 0});
    msg.resize(msg.size() + 136, 0);
    raw.send(msg);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CREATE3args c;
  c.where = {root_, "after"};
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  std::string data(1 << 20, 'z');
  WRITE3args w{*cr.obj, 0, 1u << 20, stable_how::FILE_SYNC,
               {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}};
  auto wr = call<WRITE3res>(Proc::WRITE, w, {0, 0, true, 1u << 20});
  ASSERT_EQ(wr.status, NFS3_OK);
  EXPECT_EQ(wr.count, 1u << 20);
}

TEST_F(OverRdma, ErrVersAndErrChunkFromHandMadeHeaders) {
  RawRdma raw(server_->rdma_port());
  rpcrdma::Header h = raw.exchange(raw_header(0xabc, 2, 0, {0, 0, 0}));
  EXPECT_EQ(h.proc, rpcrdma::RDMA_ERROR);
  EXPECT_EQ(h.error, rpcrdma::ERR_VERS);
  EXPECT_EQ(h.xid, 0xabcu);
  EXPECT_EQ(h.vers_low, 1u);
  EXPECT_EQ(h.vers_high, 1u);
  // RDMA_NOMSG without a position-zero Read chunk.
  h = raw.exchange(raw_header(0xabd, 1, 1, {0, 0, 0}));
  EXPECT_EQ(h.proc, rpcrdma::RDMA_ERROR);
  EXPECT_EQ(h.error, rpcrdma::ERR_CHUNK);
  EXPECT_EQ(h.xid, 0xabdu);
  // A Read segment at a misaligned position, longer than any cap, far away.
  h = raw.exchange(raw_header(0xabe, 1, 0, {1, 3, 7, 0x7fffffff, 0xdead, 0xbeef, 0, 0, 0}));
  EXPECT_EQ(h.error, rpcrdma::ERR_CHUNK);
  // Deprecated RDMA_MSGP, and a header cut short.
  h = raw.exchange(raw_header(0xabf, 1, 2, {0, 0, 0}));
  EXPECT_EQ(h.error, rpcrdma::ERR_CHUNK);
  h = raw.exchange(raw_header(0xac0, 1, 0, {1}));
  EXPECT_EQ(h.error, rpcrdma::ERR_CHUNK);
  // A well-behaved client is served throughout.
  auto g = call<GETATTR3res>(Proc::GETATTR, FhArgs{root_});
  EXPECT_EQ(g.status, NFS3_OK);
}

// Chunk lists longer than the decoder's caps (RFC 8166 leaves the bound to
// the implementation): 33 Read segments, 5 Write chunks, a Write chunk and a
// Reply chunk of 33 segments each. All ERR_CHUNK; nothing is allocated for them.
TEST_F(OverRdma, ChunkListsOverTheCapsAreErrChunk) {
  RawRdma raw(server_->rdma_port());
  auto segment = [](std::vector<std::uint32_t>& w, std::uint32_t i) {
    w.insert(w.end(), {0x100u + i, 4096, 0, 0x1000u * i});  // handle, length, offset (64 bits)
  };
  std::vector<std::uint32_t> reads;
  for (std::uint32_t i = 0; i < 33; ++i) {
    reads.insert(reads.end(), {1, 0});  // present, position 0
    segment(reads, i);
  }
  reads.insert(reads.end(), {0, 0, 0});
  std::vector<std::uint32_t> writes = {0};
  for (std::uint32_t i = 0; i < 5; ++i) {
    writes.insert(writes.end(), {1, 1});
    segment(writes, i);
  }
  writes.insert(writes.end(), {0, 0});
  std::vector<std::uint32_t> long_write = {0, 1, 33}, long_reply = {0, 0, 1, 33};
  for (std::uint32_t i = 0; i < 33; ++i) {
    segment(long_write, i);
    segment(long_reply, i);
  }
  long_write.insert(long_write.end(), {0, 0});
  std::uint32_t xid = 0xc00;
  for (const auto& rest : {reads, writes, long_write, long_reply}) {
    rpcrdma::Header h = raw.exchange(raw_header(++xid, 1, 0, rest));
    EXPECT_EQ(h.proc, rpcrdma::RDMA_ERROR) << xid;
    EXPECT_EQ(h.error, rpcrdma::ERR_CHUNK) << xid;
    EXPECT_EQ(h.xid, xid);
  }
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
}

// A WRITE whose Read chunk names memory the client never registered (a key
// nobody issued; a range far past a real one): the provider does not serve
// the server's RDMA Read (on the tcp provider it never completes), so the
// server's RMA deadline (--rdma-timeout) reports it and drops that connection
// without a reply, freeing the payload buffer; other clients are served
// throughout, and nothing is written from memory nobody offered.
TEST_F(OverRdma, ReadChunkOutsideAnyRegistrationIsRefusedAndReported) {
  CREATE3args c;
  c.where = {root_, "target"};
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  std::string before(2048, 'k');  // small enough to go inline
  WRITE3args w{*cr.obj, 0, 2048, stable_how::FILE_SYNC,
               {reinterpret_cast<const std::uint8_t*>(before.data()), before.size()}};
  ASSERT_EQ(call<WRITE3res>(Proc::WRITE, w).status, NFS3_OK);
  std::size_t reports = 0;
  for (std::uint32_t handle : {0xdeadbeefu, 0x1u}) {
    RawRdma raw(server_->rdma_port());
    // WRITE3args up to the data's length; the data itself is the Read chunk at that position.
    std::vector<std::uint8_t> args;
    xdr::Encoder e(args);
    codec(e, *cr.obj);
    e.u64(0);
    e.u32(4096);
    e.u32(static_cast<std::uint32_t>(stable_how::FILE_SYNC));
    e.u32(4096);
    auto rpc_call = make_call(0xd00 + handle, kProgram, kVersion, static_cast<std::uint32_t>(Proc::WRITE), args);
    auto position = static_cast<std::uint32_t>(rpc_call.size());
    auto msg = raw_header(0xd00 + handle, 1, 0, {1, position, handle, 4096, 0x7fff, 0xffff0000, 0, 0, 0});
    msg.insert(msg.end(), rpc_call.begin(), rpc_call.end());
    raw.send(msg);
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::string log = server_->log();
      std::size_t n = 0;
      for (auto p = log.find("not done after"); p != std::string::npos; p = log.find("not done after", p + 1)) ++n;
      if (n > reports) {
        reports = n;
        break;
      }
    }
    EXPECT_GT(reports, 0u) << "the refused RDMA Read was not reported (handle " << handle << ")";
    EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
  }
  // Nothing was written from memory nobody offered.
  auto r = call<READ3res>(Proc::READ, READ3args{*cr.obj, 0, 2048});
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.data.data()), r.data.size()), before);
}

}  // namespace
}  // namespace nfsrdma::test
