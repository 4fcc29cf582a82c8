// Hostile RPC-over-RDMA peers against the real nfsrdma-server: hand-made
// transport headers with wrong versions, chunk lists over the caps, circular-
// looking and overlapping chunks, memory nobody registered, clients dying
// mid-call and more calls than credits. Each gets the protocol's error or a
// closed connection, and a well-behaved client (the fixture's) is served
// throughout.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "tests/raw_rdma.hpp"
#include "tests/rdma_fixture.hpp"

namespace nfsrdma::test {
namespace {

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
  rpcrdma::WriteChunk folded;
  for (int i = 0; i < 4; ++i) folded.segments.push_back(raw.segment(0, 1024));
  const ReducedRead reply = read_by(raw, folded, 0xe11, fh, 4096);
  ASSERT_TRUE(reply.ok);
  EXPECT_EQ(reply.placed, 4096u);
  ASSERT_EQ(reply.status, NFS3_OK);
  EXPECT_EQ(reply.count, 4096u);
  auto mem = raw.exposed();
  EXPECT_TRUE(std::all_of(mem.begin(), mem.begin() + 1024, [&](std::uint8_t b) { return b == mem[0]; }));
  EXPECT_TRUE(mem[0] >= 'A' && mem[0] <= 'D') << static_cast<int>(mem[0]);
  EXPECT_EQ(mem[1024], 0) << "written past what the segments named";
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
}

// A READ whose Write chunk is smaller than the count it asks: the server
// reads only what the chunk holds and says so, a short read the client asks
// on from (nfsd answers ERR_CHUNK; either is RFC 8166's, this one loses no
// call), and writes nothing past the chunk.
TEST_F(OverRdma, AWriteChunkSmallerThanTheReadGetsAShortRead) {
  std::string data(8192, 'x');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  nfs_fh3 fh = file_with("short", data);
  RawRdma raw(server_->rdma_port());
  auto mem = raw.exposed();
  std::fill(mem.begin(), mem.begin() + 4096, 0);
  rpcrdma::WriteChunk small;
  small.segments.push_back(raw.segment(0, 1000));
  const ReducedRead reply = read_by(raw, small, 0xe15, fh, 8192);
  ASSERT_TRUE(reply.ok);
  EXPECT_EQ(reply.placed, 1000u);
  ASSERT_EQ(reply.status, NFS3_OK);
  EXPECT_EQ(reply.count, 1000u);
  EXPECT_EQ(reply.length, 1000u);
  EXPECT_FALSE(reply.eof);
  EXPECT_EQ(reply.left, 0u) << "the data went by the Write chunk, not inline";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mem.data()), 1000), data.substr(0, 1000));
  EXPECT_EQ(mem[1000], 0) << "written past the chunk";
}

// A READ sent as RDMA_NOMSG, the whole call in a position-zero Read chunk,
// that also offers a Write chunk for its data (RFC 8166 allows both): the
// data goes by the Write chunk, not into a reply too long to send inline.
TEST_F(OverRdma, ANomsgReadGetsItsDataByItsWriteChunk) {
  std::string data(16384, 'x');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('A' + i % 23);
  nfs_fh3 fh = file_with("nomsg", data);
  RawRdma raw(server_->rdma_port());
  rpcrdma::WriteChunk into;
  into.segments.push_back(raw.segment(0, 16384));
  const ReducedRead reply = read_by(raw, into, 0xe17, fh, 16384, true);
  ASSERT_TRUE(reply.ok);
  EXPECT_EQ(reply.placed, 16384u);
  ASSERT_EQ(reply.status, NFS3_OK);
  EXPECT_EQ(reply.count, 16384u);
  EXPECT_EQ(reply.left, 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(raw.exposed().data()), 16384), data);
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

// A client that ignores its credits: 32 READs of 1 MiB at once, all into the
// same memory, and it never polls, so the server's RDMA Writes to it stall and
// its calls stay in progress. The server closes that connection once a call
// arrives beyond the 4 it granted and the 16 it tolerates on top (a credit
// reused before the server saw the Send of its reply complete), and serves
// the well-behaved client.
TEST_F(OverRdmaFewCredits, MoreCallsThanCreditsClosesThatConnection) {
  nfs_fh3 fh = file_with("flood", std::string(1 << 20, 'f'));
  RawRdma raw(server_->rdma_port());
  for (std::uint32_t i = 0; i < 32; ++i) {
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
  EXPECT_TRUE(closed) << "32 calls against 4 credits were not refused";
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
  auto rd = call<READ3res>(Proc::READ, READ3args{fh, 0, 4096}, {4096 + 256, 4096});
  ASSERT_EQ(rd.status, NFS3_OK);
  EXPECT_EQ(rd.count, 4096u);
}

// RDMA Reads and Writes a client never serves are left to run for 30 s here.
class OverRdmaPatient : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override {
    return {"--rdma-timeout", "30", "--metrics", "127.0.0.1:" + std::to_string(metrics_port_)};
  }
  const std::uint16_t metrics_port_ = free_port();
};

// Three clients that never take their replies: each sends 32 READs of 1 MiB
// with Write chunks, posts one receive and never polls, so the server's RDMA
// Writes to them stall. What they hold is their requests, fixed per
// connection, and at most 16 payload buffers each from the server's fixed
// pool of 64: memory does not grow with what they send, and the well-behaved
// client is served meanwhile from the buffers left.
TEST_F(OverRdmaPatient, ClientsThatNeverTakeTheirRepliesHoldABoundedAmount) {
  const std::string data(1 << 20, 'n');
  nfs_fh3 fh = file_with("never", data);
  auto read_mib = [&] {
    auto r = call<READ3res>(Proc::READ, READ3args{fh, 0, 1 << 20}, {(1 << 20) + 256, 1 << 20});
    return r.status == NFS3_OK && r.count == (1u << 20);
  };
  ASSERT_TRUE(read_mib());
  const long before = rss_kib(server_->pid());
  std::vector<std::unique_ptr<RawRdma>> hogs;
  std::uint32_t xid = 0xa000;
  for (int h = 0; h < 3; ++h) {
    hogs.push_back(std::make_unique<RawRdma>(server_->rdma_port()));
    for (int i = 0; i < 32; ++i, ++xid) {
      rpcrdma::Header hdr = call_header(xid);
      rpcrdma::WriteChunk into;
      into.segments.push_back(hogs.back()->segment(0, 1 << 20));
      hdr.write_list.push_back(into);
      hogs.back()->send(message(hdr, read_call(xid, fh, 1 << 20)));
    }
  }
  long peak = before;
  for (int i = 0; i < 40; ++i) {
    EXPECT_TRUE(read_mib()) << "the well-behaved client was not served";
    peak = std::max(peak, rss_kib(server_->pid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("3 RDMA clients never taking 96 replies of 1 MiB: server RSS %ld KiB before, peak %ld KiB (+%ld KiB)\n",
              before, peak, peak - before);
  // The requests' trace names what each stalled call waits on: an RDMA
  // Write into the hog's memory or the Send after it, and past a hog's 16
  // payload buffers, a buffer.
  const std::string trace = scrape(metrics_port_, "/debug/rdma?n=256");
  std::map<std::string, int> waiting;  // state: requests
  for (std::size_t at = 0; (at = trace.find("\n  request ", at)) != std::string::npos; ++at) {
    const std::string line = trace.substr(at + 3, trace.find('\n', at + 1) - at - 3);
    EXPECT_NE(line.find("(xid 0x0000a0"), std::string::npos) << "not a hog's call: " << line;
    const auto state = line.substr(line.find(' ', 8) + 1);
    ++waiting[state.substr(0, state.find(' '))];
  }
  EXPECT_GE(waiting["area_buffer"], 3) << trace;
  EXPECT_GE(waiting["pushing_data"] + waiting["sending"], 3) << trace;
  EXPECT_NE(trace.find("  received\n"), std::string::npos) << trace;
  // The payload pool (64 x 1.06 MiB) may be touched in full, plus a little per connection.
  if (!kSanitized) {
    EXPECT_LT(peak - before, 96L * 1024);
  }
}

// What an idle RPC-over-RDMA connection costs the server: 100 connections
// that never send a call. Every credit's buffers and every request were made
// at accept, with queues of 1024 each way: 2.3 MiB each on the tcp provider,
// 6.1 MiB on verbs (soft-RoCE, the kernel suite). A connection now starts
// with 8 credits' worth and grows with use: 578 and 650 KiB; with 8 KiB
// inline buffers (4 KiB before) 594 and 777 KiB. What is left on the tcp
// provider is mostly its own, about 450 KiB of transfer entries per endpoint,
// made at the first posted receive.
class OverRdmaManyIdle : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override { return {"--max-connections-per-address", "200"}; }
};

TEST_F(OverRdmaManyIdle, AnIdleConnectionCostsLittle) {
  constexpr int kIdle = 100;
  ASSERT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
  const long before = rss_kib(server_->pid());
  std::vector<std::unique_ptr<RawRdma>> idle;
  for (int i = 0; i < kIdle; ++i) idle.push_back(std::make_unique<RawRdma>(server_->rdma_port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long after = rss_kib(server_->pid());
  std::printf("%d idle RPC-RDMA connections (%s provider): server RSS %ld KiB before, %ld after: %ld KiB each\n", kIdle,
              test_provider().c_str(), before, after, (after - before) / kIdle);
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);
  if (!kSanitized) {
    EXPECT_LT((after - before) / kIdle, 896) << "KiB per idle connection";
  }
}

}  // namespace
}  // namespace nfsrdma::test
