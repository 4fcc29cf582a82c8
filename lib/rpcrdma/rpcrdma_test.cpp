#include <gtest/gtest.h>

#include "lib/rpcrdma/chunk_plan.hpp"
#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"

namespace nfsrdma::rpcrdma {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes enc(const Header& h) {
  Bytes out;
  xdr::Encoder e(out);
  encode_header(e, h);
  return out;
}

// RFC 8166 §4.3: xid, vers, credits, proc RDMA_MSG, then three empty lists.
const Bytes kPlainMsg = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

// A WRITE call: one Read segment at XDR position 136 (handle 0x11223344,
// 1 MiB at 0x00007f0000001000), no Write list, no Reply chunk.
const Bytes kReadChunk = {
    0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0,  // xid 2, vers 1, credits 1, RDMA_MSG
    0, 0, 0, 1,                                      // Read list: an entry follows
    0, 0, 0, 136,                                    //   position
    0x11, 0x22, 0x33, 0x44, 0, 0x10, 0, 0,           //   handle, length 1 MiB
    0, 0, 0x7f, 0, 0, 0, 0x10, 0,                    //   offset
    0, 0, 0, 0,                                      // end of Read list
    0, 0, 0, 0,                                      // Write list empty
    0, 0, 0, 0,                                      // no Reply chunk
};

// A READ reply: a Write chunk of two segments, and a one-segment Reply chunk.
const Bytes kWriteAndReply = {
    0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 128, 0, 0, 0, 0,  // xid 3, vers 1, credits 128, RDMA_MSG
    0, 0, 0, 0,                                        // Read list empty
    0, 0, 0, 1, 0, 0, 0, 2,                            // Write list: a chunk of 2 segments
    0, 0, 0, 7, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0,  // key 7, 4096 bytes at 0x2000
    0, 0, 0, 8, 0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x40, 0,  // key 8, 2048 bytes at 0x4000
    0, 0, 0, 0,                                        // end of Write list
    0, 0, 0, 1, 0, 0, 0, 1,                            // Reply chunk of 1 segment
    0, 0, 0, 9, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0, 0x80, 0,  // key 9, 1024 bytes at 0x8000
};

const Bytes kErrVers = {0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
const Bytes kErrChunk = {0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2};

TEST(RpcRdmaHeader, GoldenPlainMessage) {
  Header h;
  h.xid = 1;
  h.credits = 32;
  EXPECT_EQ(enc(h), kPlainMsg);
  auto d = decode_header(kPlainMsg);
  ASSERT_EQ(d.failure, DecodeFailure::none);
  EXPECT_EQ(d.header_bytes, 28u);
  EXPECT_EQ(d.header.credits, 32u);
}

TEST(RpcRdmaHeader, GoldenReadChunk) {
  Header h;
  h.xid = 2;
  h.credits = 1;
  h.read_list.push_back({136, {0x11223344, 1u << 20, 0x00007f0000001000ULL}});
  EXPECT_EQ(enc(h), kReadChunk);
  auto d = decode_header(kReadChunk);
  ASSERT_EQ(d.failure, DecodeFailure::none);
  ASSERT_EQ(d.header.read_list.size(), 1u);
  EXPECT_EQ(d.header.read_list[0], h.read_list[0]);
  EXPECT_EQ(read_chunk_length(d.header.read_list, 136), 1u << 20);
}

TEST(RpcRdmaHeader, GoldenWriteAndReplyChunks) {
  Header h;
  h.xid = 3;
  h.credits = 128;
  WriteChunk w;
  w.segments.push_back({7, 4096, 0x2000});
  w.segments.push_back({8, 2048, 0x4000});
  h.write_list.push_back(w);
  WriteChunk r;
  r.segments.push_back({9, 1024, 0x8000});
  h.reply_chunk = r;
  EXPECT_EQ(enc(h), kWriteAndReply);
  auto d = decode_header(kWriteAndReply);
  ASSERT_EQ(d.failure, DecodeFailure::none);
  ASSERT_EQ(d.header.write_list.size(), 1u);
  EXPECT_EQ(d.header.write_list[0].length(), 6144u);
  ASSERT_TRUE(d.header.reply_chunk);
  EXPECT_EQ(d.header.reply_chunk->segments[0].handle, 9u);
  EXPECT_EQ(d.header_bytes, kWriteAndReply.size());
}

TEST(RpcRdmaHeader, GoldenErrors) {
  Header v;
  v.xid = 4;
  v.proc = RDMA_ERROR;
  v.error = ERR_VERS;
  EXPECT_EQ(enc(v), kErrVers);
  Header c;
  c.xid = 5;
  c.proc = RDMA_ERROR;
  c.error = ERR_CHUNK;
  EXPECT_EQ(enc(c), kErrChunk);
  auto d = decode_header(kErrVers);
  ASSERT_EQ(d.failure, DecodeFailure::none);
  EXPECT_EQ(d.header.error, ERR_VERS);
  EXPECT_EQ(d.header.vers_high, 1u);
}

TEST(RpcRdmaHeader, TruncationAtEveryOffsetFails) {
  for (const Bytes* golden : {&kPlainMsg, &kReadChunk, &kWriteAndReply, &kErrVers, &kErrChunk}) {
    for (std::size_t n = 0; n < golden->size(); ++n) {
      Bytes cut(golden->begin(), golden->begin() + static_cast<long>(n));
      auto d = decode_header(cut);
      EXPECT_NE(d.failure, DecodeFailure::none) << n << " of " << golden->size();
      if (n >= 4) {
        EXPECT_EQ(d.header.xid, (*golden)[3]) << "xid must be known to answer";
      }
    }
  }
}

TEST(RpcRdmaHeader, VersionAndProcChecks) {
  Bytes v2 = kPlainMsg;
  v2[7] = 2;
  EXPECT_EQ(decode_header(v2).failure, DecodeFailure::bad_version);
  Bytes msgp = kPlainMsg;
  msgp[15] = 2;  // RDMA_MSGP: deprecated
  EXPECT_EQ(decode_header(msgp).failure, DecodeFailure::bad_header);
  Bytes done = kPlainMsg;
  done[15] = 3;
  EXPECT_EQ(decode_header(done).failure, DecodeFailure::bad_header);
}

TEST(RpcRdmaHeader, ListsLongerThanCapsAreRefused) {
  Bytes many = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0};
  for (std::size_t i = 0; i <= kMaxReadSegments; ++i) {
    Bytes entry = {0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0};
    many.insert(many.end(), entry.begin(), entry.end());
  }
  many.insert(many.end(), 12, 0);
  EXPECT_EQ(decode_header(many).failure, DecodeFailure::bad_header);
  Bytes huge_count = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                      0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(decode_header(huge_count).failure, DecodeFailure::bad_header);
}

TEST(RpcRdmaHeader, ValidateCall) {
  Limits lim;
  Header h;
  h.read_list.push_back({136, {1, 4096, 0x1000}});
  EXPECT_TRUE(validate_call(h, lim).ok());
  Header misaligned = h;
  misaligned.read_list[0].position = 137;
  EXPECT_FALSE(validate_call(misaligned, lim).ok());
  Header two_chunks = h;
  two_chunks.read_list.push_back({200, {1, 4, 0x1000}});
  EXPECT_FALSE(validate_call(two_chunks, lim).ok());
  Header unsorted;
  unsorted.read_list.push_back({200, {1, 4, 0}});
  unsorted.read_list.push_back({136, {1, 4, 0}});
  EXPECT_FALSE(validate_call(unsorted, lim).ok());
  Header too_big;
  too_big.read_list.push_back({8, {1, 2u << 20, 0}});
  EXPECT_FALSE(validate_call(too_big, lim).ok());
  Header wraps;
  wraps.read_list.push_back({8, {1, 4096, ~0ULL - 10}});
  EXPECT_FALSE(validate_call(wraps, lim).ok());
  Header nomsg;
  nomsg.proc = RDMA_NOMSG;
  EXPECT_FALSE(validate_call(nomsg, lim).ok());
  nomsg.read_list.push_back({0, {1, 8192, 0}});
  EXPECT_TRUE(validate_call(nomsg, lim).ok());
  Header msg_pos0;
  msg_pos0.read_list.push_back({0, {1, 8192, 0}});
  EXPECT_FALSE(validate_call(msg_pos0, lim).ok());
  Header writes;
  WriteChunk w;
  w.segments.push_back({2, 4096, 0});
  writes.write_list.push_back(w);
  writes.write_list.push_back(w);
  EXPECT_FALSE(validate_call(writes, lim).ok());
}

TEST(PrivateData, GoldenAndTolerant) {
  ConnectPrivate p;
  auto bytes = encode_private(p);
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), (Bytes{0xf6, 0xab, 0x0e, 0x18, 1, 0, 7, 7}));  // 8 KiB each way
  auto d = decode_private(bytes);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->send_size, 8192u);
  EXPECT_EQ(d->recv_size, 8192u);
  Bytes prefixed = {8, 0xf6, 0xab, 0x0e, 0x18, 1, 1, 0, 255};
  auto q = decode_private(prefixed);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->remote_invalidate);
  EXPECT_EQ(q->send_size, 1024u);
  EXPECT_EQ(q->recv_size, 256u * 1024);
  Bytes padded(bytes.begin(), bytes.end());
  padded.resize(56, 0);
  EXPECT_TRUE(decode_private(padded));
  EXPECT_FALSE(decode_private(Bytes{}));
  EXPECT_FALSE(decode_private(Bytes{1, 2, 3, 4, 5, 6, 7, 8}));
  for (std::size_t n = 0; n < 8; ++n) EXPECT_FALSE(decode_private(std::span(bytes.data(), n)));
  // The Linux kernel's data (send 4 KiB, receive 4 KiB) as libfabric's verbs
  // provider hands it over: 0xf6 taken as a length, the rest, then zeros.
  Bytes kernel = {0xab, 0x0e, 0x18, 1, 0, 3, 3};
  kernel.resize(64, 0);
  auto k = decode_private(kernel);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->version, 1);
  EXPECT_EQ(k->send_size, 4096u);
  EXPECT_EQ(k->recv_size, 4096u);
  for (std::size_t n = 0; n < 7; ++n) EXPECT_FALSE(decode_private(std::span(kernel.data(), n)));
  EXPECT_FALSE(decode_private(Bytes{0xab, 0x0e, 0x19, 1, 0, 3, 3}));
  // The same as the kernel's nfsd accepts with on soft-RoCE: 246 bytes, so
  // 0xab reads as a length byte that fits too (it was then taken for ours).
  Bytes nfsd = {0xab, 0x0e, 0x18, 1, 0, 3, 3};
  nfsd.resize(246, 0);
  auto n = decode_private(nfsd);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->send_size, 4096u);
  EXPECT_EQ(n->recv_size, 4096u);
  EXPECT_TRUE(n->peer_cannot_read_ours);
  EXPECT_EQ(peer_send_inline(n, 8192), 4096u);
  EXPECT_EQ(peer_send_inline(d, 8192), 8192u);
  EXPECT_EQ(peer_send_inline(d, 2048), 2048u);
  EXPECT_EQ(peer_send_inline(std::nullopt, 8192), 1024u);
  // What we may send inline: theirs within ours; 1024 when they said nothing,
  // and when they could not read ours (the kernel, through verbs).
  EXPECT_TRUE(k->peer_cannot_read_ours);
  EXPECT_FALSE(d->peer_cannot_read_ours);
  EXPECT_FALSE(q->peer_cannot_read_ours);
  EXPECT_EQ(peer_receive_inline(k, 4096), 1024u);
  EXPECT_EQ(peer_receive_inline(d, 4096), 4096u);
  EXPECT_EQ(peer_receive_inline(q, 4096), 4096u);
  EXPECT_EQ(peer_receive_inline(q, 2048), 2048u);
  EXPECT_EQ(peer_receive_inline(std::nullopt, 4096), 1024u);
  ConnectPrivate big;
  big.send_size = 1u << 30;
  EXPECT_EQ(encode_private(big)[6], 255);
}

TEST(ChunkPlan, SmallCallsAndRepliesStayInline) {
  Plan p = plan_call({120, 0, 0, 200, 0}, 4096, 4096);
  EXPECT_EQ(p.proc, RDMA_MSG);
  EXPECT_EQ(p.read_bytes, 0u);
  EXPECT_EQ(p.inline_bytes, 120u);
  EXPECT_EQ(p.write_bytes + p.reply_bytes, 0u);
}

TEST(ChunkPlan, WriteDataGoesInAReadChunkWithoutRoundUp) {
  // WRITE of 1 MiB + 3 bytes: the data starts at XDR position 136.
  const std::uint32_t data = (1u << 20) + 3;
  Plan p = plan_call({136 + data + 1, 136, data, 200, 0}, 4096, 4096);
  EXPECT_EQ(p.proc, RDMA_MSG);
  EXPECT_EQ(p.read_position, 136u);
  EXPECT_EQ(p.read_bytes, data);
  EXPECT_EQ(p.inline_bytes, 136u);
}

TEST(ChunkPlan, OversizedCallWithoutPayloadIsNomsg) {
  Plan p = plan_call({6000, 0, 0, 200, 0}, 4096, 4096);
  EXPECT_EQ(p.proc, RDMA_NOMSG);
  EXPECT_EQ(p.read_position, 0u);
  EXPECT_EQ(p.read_bytes, 6000u);
  EXPECT_EQ(p.inline_bytes, 0u);
}

TEST(ChunkPlan, ReadResultsUseAWriteChunkAndDirectoriesAReplyChunk) {
  Plan read = plan_call({140, 0, 0, 200 + (1u << 20), 1u << 20}, 4096, 4096);
  EXPECT_EQ(read.write_bytes, 1u << 20);
  EXPECT_EQ(read.reply_bytes, 0u);
  Plan small_read = plan_call({140, 0, 0, 200 + 512, 512}, 4096, 4096);
  EXPECT_EQ(small_read.write_bytes, 0u);
  Plan readdir = plan_call({150, 0, 0, 65536, 0}, 4096, 4096);
  EXPECT_EQ(readdir.write_bytes, 0u);
  EXPECT_EQ(readdir.reply_bytes, 65536u);
  Plan legacy_peer = plan_call({900, 0, 0, 200, 0}, kLegacyInline, 4096);
  EXPECT_EQ(legacy_peer.proc, RDMA_NOMSG);
}

TEST(ChunkPlan, WriteAndReplyChunksAreNeverOfferedTogether) {
  // Linux nfsd fails a call offering both (E2BIG) and drops the connection.
  // Whatever the thresholds and sizes: a Write chunk alone when the rest fits
  // inline, else a Reply chunk large enough for the whole reply.
  for (std::uint32_t inl = 1024; inl <= 8192; inl += 1024) {
    for (std::uint32_t data : {1u, 600u, 1000u, 4096u, 8192u, 65536u, 1u << 20}) {
      for (std::uint32_t rest : {200u, 528u, 900u, 1024u, 4096u}) {
        const std::uint32_t reply_max = rest + static_cast<std::uint32_t>(xdr::pad4(data));
        Plan p = plan_call({140, 0, 0, reply_max, data}, inl, inl);
        SCOPED_TRACE(testing::Message() << "inline " << inl << " data " << data << " rest " << rest);
        EXPECT_FALSE(p.write_bytes && p.reply_bytes);
        if (reply_max <= inl - kHeaderReserve) {
          EXPECT_EQ(p.write_bytes + p.reply_bytes, 0u);
        } else if (rest <= inl - kHeaderReserve) {
          EXPECT_EQ(p.write_bytes, data);
        } else {
          EXPECT_EQ(p.reply_bytes, reply_max);
        }
      }
    }
  }
  // A READ's exact rest (528 bytes) fits even the 1 KiB minimum: Write chunk.
  Plan legacy_read = plan_call({140, 0, 0, 528 + 4096, 4096}, kLegacyInline, kLegacyInline);
  EXPECT_EQ(legacy_read.write_bytes, 4096u);
  EXPECT_EQ(legacy_read.reply_bytes, 0u);
}

}  // namespace
}  // namespace nfsrdma::rpcrdma
