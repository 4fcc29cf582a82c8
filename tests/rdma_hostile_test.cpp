// Hostile RPC-over-RDMA peers against the real nfsrdma-server: hand-made
// transport headers with wrong versions, chunk lists over the caps, circular-
// looking and overlapping chunks, memory nobody registered, clients dying
// mid-call and more calls than credits. Each gets the protocol's error or a
// closed connection, and a well-behaved client (the fixture's) is served
// throughout.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "tests/rdma_fixture.hpp"

namespace nfsrdma::test {
namespace {

// A peer speaking hand-made bytes straight over lib/fabric. It exposes one
// region the server may RDMA Read and Write, and polls only when asked to, so
// a test controls whether the server's RDMA to it makes progress.
class RawRdma {
 public:
  static constexpr std::size_t kRecvBytes = 8192, kSends = 32, kSendBytes = 4096, kExposedBytes = 1 << 20;

  explicit RawRdma(std::uint16_t port) : buf_(kRecvBytes + kSends * kSendBytes + kExposedBytes) {
    auto info = fabric::get_info(test_provider(), test_server_host(), std::to_string(port), false);
    if (!info) throw std::runtime_error(info.error().describe());
    info_ = std::move(*info);
    domain_ = fabric::Domain::open(info_.get()).value();
    mr_ = domain_->register_memory(buf_.data(), buf_.size(), true).value();
    std::vector<std::uint8_t> theirs;
    auto priv = rpcrdma::encode_private({});
    auto ep = fabric::Endpoint::connect(*domain_, info_.get(), priv, theirs, 5000, 2 * kSends,
                                        [&](fabric::Endpoint& e) { return post_recv(e); });
    if (!ep) throw std::runtime_error(ep.error().describe());
    ep_ = std::move(*ep);
  }
  // Sends `msg` without waiting for anything; up to kSends may be in flight.
  void send(const std::vector<std::uint8_t>& msg) {
    if (msg.size() > kSendBytes) throw std::runtime_error("message too long for a send buffer");
    std::size_t i = sent_++ % kSends;
    std::uint8_t* at = buf_.data() + kRecvBytes + i * kSendBytes;
    std::memcpy(at, msg.data(), msg.size());
    if (!ep_->post_send(&send_ctx_[i], at, msg.size(), mr_.desc())) throw std::runtime_error("send");
  }
  // Sends `msg` and returns the decoded reply header; `body` gets the RPC
  // message after it.
  rpcrdma::Header exchange(const std::vector<std::uint8_t>& msg, std::vector<std::uint8_t>* body = nullptr) {
    send(msg);
    for (int i = 0; i < 50; ++i) {
      fabric::Completion c[4];
      auto n = ep_->poll(c, 100);
      if (!n) throw std::runtime_error(n.error().describe());
      for (std::size_t k = 0; k < *n; ++k) {
        if (c[k].context != &recv_ctx_) continue;
        auto d = rpcrdma::decode_header(std::span(buf_.data(), c[k].len));
        if (body) body->assign(buf_.begin() + static_cast<long>(d.header_bytes), buf_.begin() + static_cast<long>(c[k].len));
        std::memset(buf_.data(), 0, kRecvBytes);
        if (!post_recv(*ep_)) throw std::runtime_error("recv");
        return d.header;
      }
    }
    throw std::runtime_error("no reply");
  }
  // The memory the server may reach, and segments naming parts of it.
  std::span<std::uint8_t> exposed() { return {buf_.data() + kRecvBytes + kSends * kSendBytes, kExposedBytes}; }
  rpcrdma::Segment segment(std::size_t offset, std::uint32_t length) {
    return {mr_.key(), length, mr_.remote_address(exposed().data() + offset)};
  }

 private:
  Result<void> post_recv(fabric::Endpoint& e) { return e.post_recv(&recv_ctx_, buf_.data(), kRecvBytes, mr_.desc()); }

  std::vector<std::uint8_t> buf_;  // receive buffer, send buffers, exposed region
  fabric::Info info_;
  std::unique_ptr<fabric::Domain> domain_;
  fabric::MemoryRegion mr_;
  std::unique_ptr<fabric::Endpoint> ep_;
  fabric::OpContext recv_ctx_{}, send_ctx_[kSends]{};
  std::size_t sent_ = 0;
};

// A transport header from its words after xid, version, credits and procedure.
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

std::vector<std::uint8_t> message(const rpcrdma::Header& h, const std::vector<std::uint8_t>& rpc_call = {}) {
  std::vector<std::uint8_t> out;
  xdr::Encoder e(out);
  rpcrdma::encode_header(e, h);
  out.insert(out.end(), rpc_call.begin(), rpc_call.end());
  return out;
}

rpcrdma::Header call_header(std::uint32_t xid) {
  rpcrdma::Header h;
  h.xid = xid;
  h.credits = 32;
  return h;
}

// A WRITE call up to the data's length word: the data comes as a Read chunk
// at the returned message's end.
std::vector<std::uint8_t> write_call_head(std::uint32_t xid, nfs_fh3 fh, std::uint32_t count) {
  std::vector<std::uint8_t> args;
  xdr::Encoder e(args);
  codec(e, fh);
  e.u64(0);
  e.u32(count);
  e.enumeration(stable_how::FILE_SYNC);
  e.u32(count);
  return make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::WRITE), args);
}

std::vector<std::uint8_t> read_call(std::uint32_t xid, const nfs_fh3& fh, std::uint32_t count) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, READ3args{fh, 0, count});
  return make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::READ), args);
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
// the server's RDMA Read. On verbs it completes at once with a remote access
// error; on the tcp provider it never completes, and the server's RMA
// deadline (--rdma-timeout) reports it. Either way that connection is dropped
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
    // The data itself is the Read chunk at the end of the inline message.
    auto rpc_call = write_call_head(0xd00 + handle, *cr.obj, 4096);
    auto position = static_cast<std::uint32_t>(rpc_call.size());
    auto msg = raw_header(0xd00 + handle, 1, 0, {1, position, handle, 4096, 0x7fff, 0xffff0000, 0, 0, 0});
    msg.insert(msg.end(), rpc_call.begin(), rpc_call.end());
    raw.send(msg);
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::string log = server_->log();
      std::size_t n = 0;
      for (const char* report : {"not done after", "failed: Input/output error"}) {
        for (auto p = log.find(report); p != std::string::npos; p = log.find(report, p + 1)) ++n;
      }
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

// Deep and overlapping chunks that are still well-formed: a Read chunk of 32
// segments (the cap) all naming the same 128 bytes, and a Write chunk over
// that same memory on a WRITE, which has no DDP-eligible result. The server
// pulls exactly what the segments say, in order, returns the Write chunk
// unused, and leaves the memory alone.
TEST_F(OverRdma, OverlappingSegmentsAreServedExactlyAsWritten) {
  nfs_fh3 fh = file_with("overlap", "");
  RawRdma raw(server_->rdma_port());
  auto mem = raw.exposed();
  for (std::size_t i = 0; i < 128; ++i) mem[i] = static_cast<std::uint8_t>(i * 7 + 3);
  std::vector<std::uint8_t> before(mem.begin(), mem.begin() + 4096);
  auto rpc_call = write_call_head(0xe01, fh, 4096);
  rpcrdma::Header h = call_header(0xe01);
  for (int i = 0; i < 32; ++i) h.read_list.push_back({static_cast<std::uint32_t>(rpc_call.size()), raw.segment(0, 128)});
  rpcrdma::WriteChunk over;
  over.segments.push_back(raw.segment(0, 4096));
  h.write_list.push_back(over);
  std::vector<std::uint8_t> body;
  rpcrdma::Header r = raw.exchange(message(h, rpc_call), &body);
  ASSERT_EQ(r.proc, rpcrdma::RDMA_MSG);
  ASSERT_EQ(r.write_list.size(), 1u);
  EXPECT_EQ(r.write_list[0].length(), 0u);  // returned unused (RFC 8166 §3.4.6)
  xdr::Decoder d(body);
  WRITE3res w;
  ASSERT_TRUE(rpc::check_reply(d, 0xe01).ok());
  ASSERT_TRUE(xdr::decode(d, w).ok());
  ASSERT_EQ(w.status, NFS3_OK);
  EXPECT_EQ(w.count, 4096u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), mem.begin())) << "the server wrote into an unused Write chunk";
  std::ifstream disk(dir_.path() + "/overlap", std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(disk)), {});
  ASSERT_EQ(on_disk.size(), 4096u);
  for (std::size_t i = 0; i < on_disk.size(); ++i) {
    ASSERT_EQ(static_cast<std::uint8_t>(on_disk[i]), mem[i % 128]) << "byte " << i;
  }
}

// A READ whose Write chunk names the same 1 KiB four times: the server places
// 4 KiB as the segments say, so that memory ends up holding one quarter of the
// data, the reply counts 4096 bytes, and the connection lives on.
TEST_F(OverRdma, WriteChunkFoldedOntoItselfIsFilledSegmentBySegment) {
  std::string data;
  for (char q : {'A', 'B', 'C', 'D'}) data.append(1024, q);
  nfs_fh3 fh = file_with("folded", data);
  RawRdma raw(server_->rdma_port());
  rpcrdma::Header h = call_header(0xe11);
  rpcrdma::WriteChunk folded;
  for (int i = 0; i < 4; ++i) folded.segments.push_back(raw.segment(0, 1024));
  h.write_list.push_back(folded);
  std::vector<std::uint8_t> body;
  rpcrdma::Header r = raw.exchange(message(h, read_call(0xe11, fh, 4096)), &body);
  ASSERT_EQ(r.proc, rpcrdma::RDMA_MSG);
  ASSERT_EQ(r.write_list.size(), 1u);
  EXPECT_EQ(r.write_list[0].length(), 4096u);
  xdr::Decoder d(body);
  nfsstat3 st{};
  post_op_attr attrs;
  std::uint32_t count = 0;
  ASSERT_TRUE(rpc::check_reply(d, 0xe11).ok());
  d.enumeration(st);
  xdr::xdr_optional(d, attrs);
  d.u32(count);
  ASSERT_EQ(st, NFS3_OK);
  EXPECT_EQ(count, 4096u);
  auto mem = raw.exposed();
  EXPECT_TRUE(std::all_of(mem.begin(), mem.begin() + 1024, [&](std::uint8_t b) { return b == mem[0]; }));
  EXPECT_TRUE(mem[0] >= 'A' && mem[0] <= 'D') << static_cast<int>(mem[0]);
  EXPECT_EQ(mem[1024], 0) << "written past what the segments named";
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
}

// Chunk lists that loop back or point nowhere sensible: Read segments whose
// positions go backwards, two Read chunks, a Read chunk placed past the end of
// the inline message, and Write and Reply segments that wrap the address
// space. ERR_CHUNK for each, on a connection that keeps working.
TEST_F(OverRdma, CircularLookingChunkListsAreErrChunk) {
  nfs_fh3 fh = file_with("circular", std::string(8192, 'c'));
  RawRdma raw(server_->rdma_port());
  std::uint32_t xid = 0xe20;
  auto expect_err_chunk = [&](const rpcrdma::Header& h, const std::vector<std::uint8_t>& rpc_call, const char* what) {
    rpcrdma::Header r = raw.exchange(message(h, rpc_call));
    EXPECT_EQ(r.proc, rpcrdma::RDMA_ERROR) << what;
    EXPECT_EQ(r.error, rpcrdma::ERR_CHUNK) << what;
    EXPECT_EQ(r.xid, h.xid) << what;
  };
  auto head = write_call_head(++xid, fh, 256);
  auto end = static_cast<std::uint32_t>(head.size());
  rpcrdma::Header backwards = call_header(xid);
  backwards.read_list.push_back({end, raw.segment(0, 128)});
  backwards.read_list.push_back({end - 8, raw.segment(128, 128)});
  expect_err_chunk(backwards, head, "positions going backwards");
  head = write_call_head(++xid, fh, 256);
  rpcrdma::Header two = call_header(xid);
  two.read_list.push_back({end - 8, raw.segment(0, 128)});
  two.read_list.push_back({end, raw.segment(0, 128)});
  expect_err_chunk(two, head, "two Read chunks");
  head = write_call_head(++xid, fh, 256);
  rpcrdma::Header past = call_header(xid);
  past.read_list.push_back({end + 4096, raw.segment(0, 256)});
  expect_err_chunk(past, head, "a Read chunk past the inline message");
  rpcrdma::Header wraps = call_header(++xid);
  rpcrdma::WriteChunk w;
  w.segments.push_back({raw.segment(0, 0).handle, 4096, ~std::uint64_t{0} - 100});
  wraps.write_list.push_back(w);
  expect_err_chunk(wraps, read_call(xid, fh, 4096), "a Write segment wrapping the address space");
  rpcrdma::Header reply_wraps = call_header(++xid);
  reply_wraps.reply_chunk = w;
  expect_err_chunk(reply_wraps, read_call(xid, fh, 4096), "a Reply segment wrapping the address space");
  // The same connection still gets answers.
  std::vector<std::uint8_t> body;
  ++xid;
  rpcrdma::Header ok = raw.exchange(message(call_header(xid), read_call(xid, fh, 512)), &body);
  EXPECT_EQ(ok.proc, rpcrdma::RDMA_MSG);
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
}

// A server granting 4 credits per connection.
class OverRdmaFewCredits : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override { return {"--rdma-timeout", "1", "--credits", "4"}; }
};

// A client that ignores its credits: 16 READs of 1 MiB at once, all into the
// same memory, and it never polls, so the server's RDMA Writes to it stall and
// its calls stay in progress. The server closes that connection once a call
// arrives beyond the 4 it granted, and serves the well-behaved client.
TEST_F(OverRdmaFewCredits, MoreCallsThanCreditsClosesThatConnection) {
  nfs_fh3 fh = file_with("flood", std::string(1 << 20, 'f'));
  RawRdma raw(server_->rdma_port());
  for (std::uint32_t i = 0; i < 16; ++i) {
    rpcrdma::Header h = call_header(0xf00 + i);
    rpcrdma::WriteChunk into;
    into.segments.push_back(raw.segment(0, 1 << 20));
    h.write_list.push_back(into);
    raw.send(message(h, read_call(0xf00 + i, fh, 1 << 20)));
  }
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    closed = server_->log().find("more calls in flight than the 4 credits granted") != std::string::npos;
  }
  EXPECT_TRUE(closed) << "16 calls against 4 credits were not refused";
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
  auto rd = call<READ3res>(Proc::READ, READ3args{fh, 0, 4096}, {4096 + 256, 4096});
  ASSERT_EQ(rd.status, NFS3_OK);
  EXPECT_EQ(rd.count, 4096u);
}

}  // namespace
}  // namespace nfsrdma::test
