#include "lib/rpcrdma/marshal.hpp"

#include <gtest/gtest.h>

namespace nfsrdma::rpcrdma {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes enc(const Header& h) {
  Bytes out;
  xdr::Encoder e(out);
  encode_header(e, h);
  return out;
}

// A 1 MiB WRITE: its data at XDR position 136 goes in a Read chunk from
// memory key 0x11223344 at 0x7f0000001000.
const Bytes kWriteCall = {
    0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 64, 0, 0, 0, 0,  // xid 2, vers 1, credits 64, RDMA_MSG
    0, 0, 0, 1, 0, 0, 0, 136,                         // Read list: position 136
    0x11, 0x22, 0x33, 0x44, 0, 0x10, 0, 0,            //   handle, 1 MiB
    0, 0, 0x7f, 0, 0, 0, 0x10, 0,                     //   offset
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,               // end of Read list, no Write list, no Reply chunk
};

// A 64 KiB READ: a Write chunk at key 7, 0x2000.
const Bytes kReadCall = {
    0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 64, 0, 0, 0, 0,         // xid 3, RDMA_MSG
    0, 0, 0, 0,                                              // no Read list
    0, 0, 0, 1, 0, 0, 0, 1,                                  // Write list: a chunk of one segment
    0, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0,       //   key 7, 64 KiB at 0x2000
    0, 0, 0, 0, 0, 0, 0, 0,                                  // end of Write list, no Reply chunk
};

// A call too large to send inline without a payload: RDMA_NOMSG, all of it in
// a position-zero Read chunk (key 5, 0x1000), its reply in a Reply chunk
// (key 9, 0x8000).
const Bytes kNomsgCall = {
    0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 64, 0, 0, 0, 1,         // xid 4, RDMA_NOMSG
    0, 0, 0, 1, 0, 0, 0, 0,                                  // Read list: position 0
    0, 0, 0, 5, 0, 0, 0x30, 0, 0, 0, 0, 0, 0, 0, 0x10, 0,    //   key 5, 12 KiB at 0x1000
    0, 0, 0, 0, 0, 0, 0, 0,                                  // end of Read list, no Write list
    0, 0, 0, 1, 0, 0, 0, 1,                                  // Reply chunk of one segment
    0, 0, 0, 9, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x80, 0,    //   key 9, 16 KiB at 0x8000
};

// kReadCall's reply: RDMA_MSG, the Write chunk cut to the 1000 bytes placed,
// then the inline rest (here 4 bytes of it).
const Bytes kReadReply = {
    0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0,         // xid 3, credits 32, RDMA_MSG
    0, 0, 0, 0,                                              // no Read list
    0, 0, 0, 1, 0, 0, 0, 1,                                  // the Write chunk, returned
    0, 0, 0, 7, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0, 0, 0x20, 0,  //   key 7, 1000 bytes at 0x2000
    0, 0, 0, 0, 0, 0, 0, 0,                                  // end of Write list, no Reply chunk
    0xde, 0xad, 0xbe, 0xef,                                  // the RPC reply
};

// kNomsgCall's reply: RDMA_NOMSG, the whole reply (3000 bytes) in the Reply chunk.
const Bytes kNomsgReply = {
    0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 1,         // xid 4, RDMA_NOMSG
    0, 0, 0, 0, 0, 0, 0, 0,                                  // no Read list, no Write list
    0, 0, 0, 1, 0, 0, 0, 1,                                  // the Reply chunk, returned
    0, 0, 0, 9, 0, 0, 0x0b, 0xb8, 0, 0, 0, 0, 0, 0, 0x80, 0,  //   key 9, 3000 bytes at 0x8000
};

TEST(Marshal, GoldenWriteCallLeavesTheDataAndItsRoundUpOutOfTheInlinePart) {
  Plan plan{RDMA_MSG, 136, 1u << 20, 0, 0, 0};
  auto m = marshal_call(2, 64, plan, 136 + (1u << 20) + 12, {.read = Target{0x11223344, 0x7f0000001000}});
  EXPECT_EQ(enc(m.header), kWriteCall);
  EXPECT_EQ(m.head_end, 136u);
  EXPECT_EQ(m.tail_from, 136u + (1u << 20));
  EXPECT_EQ(m.read_from, 136u);

  plan.read_bytes = 5;  // a 5-byte SYMLINK path: its 3 bytes of round-up stay out too
  m = marshal_call(2, 64, plan, 136 + 8 + 12, {.read = Target{1, 2}});
  EXPECT_EQ(m.head_end, 136u);
  EXPECT_EQ(m.tail_from, 144u);
}

TEST(Marshal, GoldenReadCallSendsItAllInline) {
  Plan plan{RDMA_MSG, 0, 0, 100, 64u << 10, 0};
  auto m = marshal_call(3, 64, plan, 100, {.write = Target{7, 0x2000}});
  EXPECT_EQ(enc(m.header), kReadCall);
  EXPECT_EQ(m.head_end, 100u);
  EXPECT_EQ(m.tail_from, 100u);
}

TEST(Marshal, GoldenNomsgCallSendsNothingInline) {
  Plan plan{RDMA_NOMSG, 0, 12u << 10, 0, 0, 16u << 10};
  auto m = marshal_call(4, 64, plan, 12u << 10, {.read = Target{5, 0x1000}, .reply = Target{9, 0x8000}});
  EXPECT_EQ(enc(m.header), kNomsgCall);
  EXPECT_EQ(m.head_end, 0u);
  EXPECT_EQ(m.tail_from, 12u << 10);
  EXPECT_EQ(m.read_from, 0u);
}

TEST(Marshal, OffersAreTheCallsWriteAndReplySegments) {
  Offers o = offers_of(decode_header(kNomsgCall).header);
  EXPECT_FALSE(o.write);
  ASSERT_TRUE(o.reply);
  EXPECT_EQ(*o.reply, (Segment{9, 16u << 10, 0x8000}));
  o = offers_of(decode_header(kReadCall).header);
  EXPECT_EQ(o.write, (Segment{7, 64u << 10, 0x2000}));
  EXPECT_FALSE(o.reply);
}

TEST(ReadReply, GoldenReplies) {
  Decoded d = decode_header(kReadReply);
  ReplyLayout r = read_reply(d, offers_of(decode_header(kReadCall).header));
  ASSERT_EQ(r.fault, ReplyFault::none) << r.why;
  EXPECT_FALSE(r.in_reply_chunk);
  EXPECT_EQ(r.inline_from, kReadReply.size() - 4);
  EXPECT_EQ(r.write_bytes, 1000u);

  r = read_reply(decode_header(kNomsgReply), offers_of(decode_header(kNomsgCall).header));
  ASSERT_EQ(r.fault, ReplyFault::none) << r.why;
  EXPECT_TRUE(r.in_reply_chunk);
  EXPECT_EQ(r.reply_bytes, 3000u);
}

TEST(ReadReply, RdmaErrors) {
  const Bytes vers = {0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3};
  const Bytes chunk = {0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2};
  Decoded d = decode_header(vers);
  EXPECT_EQ(read_reply(d, {}).fault, ReplyFault::err_vers);
  EXPECT_EQ(d.header.vers_low, 2u);
  EXPECT_EQ(d.header.vers_high, 3u);
  EXPECT_EQ(read_reply(decode_header(chunk), {}).fault, ReplyFault::err_chunk);
}

TEST(ReadReply, AChunkBeyondTheOfferIsRefused) {
  const Offers offered = offers_of(decode_header(kReadCall).header);
  auto with_write = [](Segment s) {
    Header h;
    h.xid = 3;
    WriteChunk w;
    w.segments.push_back(s);
    h.write_list.push_back(w);
    return h;
  };
  auto verdict = [&](const Header& h, const Offers& o) {
    Bytes b = enc(h);
    return read_reply(decode_header(b), o).fault;
  };
  EXPECT_EQ(verdict(with_write({7, 64u << 10, 0x2000}), offered), ReplyFault::none);
  EXPECT_EQ(verdict(with_write({7, (64u << 10) + 1, 0x2000}), offered), ReplyFault::overclaim);
  EXPECT_EQ(verdict(with_write({8, 100, 0x2000}), offered), ReplyFault::overclaim);
  EXPECT_EQ(verdict(with_write({7, 100, 0x2004}), offered), ReplyFault::overclaim);
  EXPECT_EQ(verdict(with_write({7, 100, 0x2000}), Offers{}), ReplyFault::overclaim);
  Header two = with_write({7, 100, 0x2000});
  two.write_list[0].segments.push_back({7, 100, 0x2000});
  EXPECT_EQ(verdict(two, offered), ReplyFault::overclaim);
  two = with_write({7, 100, 0x2000});
  two.write_list.push_back(two.write_list[0]);
  EXPECT_EQ(verdict(two, offered), ReplyFault::overclaim);
  // A Reply chunk the call never offered, on a reply that could use one.
  Header nomsg;
  nomsg.proc = RDMA_NOMSG;
  nomsg.reply_chunk = with_write({9, 10, 0x8000}).write_list[0];
  EXPECT_EQ(verdict(nomsg, offered), ReplyFault::overclaim);
  EXPECT_EQ(verdict(nomsg, Offers{.reply = Segment{9, 10, 0x8000}}), ReplyFault::none);
}

TEST(ReadReply, RepliesTheCallCannotHaveAreUnexpected) {
  Header h;
  h.proc = RDMA_NOMSG;  // no Reply chunk to hold the reply
  Bytes b = enc(h);
  EXPECT_EQ(read_reply(decode_header(b), {}).fault, ReplyFault::unexpected);
  h.reply_chunk = WriteChunk{};  // a Reply chunk of no segments holds no reply either
  b = enc(h);
  EXPECT_EQ(read_reply(decode_header(b), {.reply = Segment{9, 10, 0x8000}}).fault, ReplyFault::unexpected);
  Decoded done;  // decode_header refuses RDMA_DONE; read_reply does too
  done.header.proc = RDMA_DONE;
  EXPECT_EQ(read_reply(done, {}).fault, ReplyFault::unexpected);
}

TEST(ReadReply, EveryTruncatedHeaderIsUnparseable) {
  for (const Bytes* full : {&kReadReply, &kNomsgReply}) {
    const std::size_t header = full == &kReadReply ? full->size() - 4 : full->size();
    for (std::size_t n = 0; n < header; ++n) {
      Bytes cut(full->begin(), full->begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_EQ(read_reply(decode_header(cut), offers_of(decode_header(kNomsgCall).header)).fault,
                ReplyFault::unparseable)
          << n;
    }
  }
}

}  // namespace
}  // namespace nfsrdma::rpcrdma
