// A hostile client speaking raw bytes to the server over TCP: cut records,
// absurd record and XDR lengths, credentials that lie about their sizes, a
// flood of tiny fragments. Each gets the protocol's error reply or a closed
// connection; the server allocates nothing the bytes did not pay for, and a
// second, well-behaved client is served throughout. (The RPC-over-RDMA side
// is in rdma_test.cpp, next to its raw-header client.)
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root";
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
    good_ = std::make_unique<Client>(*server_);
    root_ = good_->mount_root(dir_.path());
  }
  void TearDown() override {
    if (server_ && HasFailure()) std::cerr << server_->log();
  }
  // The well-behaved client still gets answers.
  void still_served() { EXPECT_EQ(good_->getattr(root_).type, NF3DIR); }
  Fd raw() {
    auto fd = tcp::connect_tcp("127.0.0.1", server_->nfs_port(), true);
    EXPECT_TRUE(fd.ok());
    return std::move(*fd);
  }
  static void put(const Fd& fd, const std::vector<std::uint8_t>& b) {
    ASSERT_EQ(::send(fd.get(), b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  static bool hung_up(const Fd& fd) {
    char byte;
    timeval tv{5, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = ::recv(fd.get(), &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);  // a reset when our unread bytes were still queued
  }
  // A call with `args` whose reply's accept_stat is returned (99 if none).
  std::uint32_t accept_stat(std::uint32_t proc, const std::vector<std::uint8_t>& args) {
    static std::uint32_t next_xid = 100;
    const std::uint32_t xid = ++next_xid;
    auto reply = raw_call(good_->nfs(), xid, make_call(xid, kProgram, kVersion, proc, args));
    if (!reply) return 99;
    xdr::Decoder d(*reply);
    auto h = rpc::decode_reply(d);
    return h ? static_cast<std::uint32_t>(h->accept) : 99;
  }
  std::vector<std::uint8_t> words(std::initializer_list<std::uint32_t> w, bool with_root = true) {
    std::vector<std::uint8_t> out;
    xdr::Encoder e(out);
    if (with_root) codec(e, root_);
    for (auto x : w) e.u32(x);
    return out;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> good_;
  nfs_fh3 root_;
};

TEST_F(Hostile, CutRecordsAreDroppedWithTheirConnection) {
  {  // a record mark promising 1000 bytes, 10 of them, then the end
    auto fd = raw();
    auto mark = tcp::record_mark(1000);
    std::vector<std::uint8_t> b(mark.begin(), mark.end());
    b.resize(b.size() + 10, 0xab);
    put(fd, b);
  }
  {  // half a record mark
    auto fd = raw();
    put(fd, {0x80, 0x00});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  still_served();
}

TEST_F(Hostile, RecordLengthsNear2To31AllocateNothing) {
  long before = rss_kib(server_->pid());
  for (std::uint32_t len : {0x7fffffffu, 0x7ffffff0u, 0x40000000u}) {
    auto fd = raw();
    auto mark = tcp::record_mark(len);
    put(fd, {mark.begin(), mark.end()});
    EXPECT_TRUE(hung_up(fd)) << len;
  }
  {  // the same in a non-final fragment, whose total would pass 2^31
    auto fd = raw();
    std::vector<std::uint8_t> b;
    for (int i = 0; i < 3; ++i) {
      std::uint32_t w = 0x7fff0000u;  // last-fragment bit clear
      b.insert(b.end(), {static_cast<std::uint8_t>(w >> 24), static_cast<std::uint8_t>(w >> 16), 0, 0});
    }
    put(fd, b);
    EXPECT_TRUE(hung_up(fd));
  }
  EXPECT_LT(rss_kib(server_->pid()) - before, 64 * 1024) << "the server allocated for lengths it was only promised";
  still_served();
}

TEST_F(Hostile, XdrLengthsNear2To32AreGarbageArgs) {
  constexpr auto kGarbage = static_cast<std::uint32_t>(rpc::AcceptStat::garbage_args);
  // LOOKUP with a name "4 GiB" long; WRITE whose data length says 4 GiB;
  // SYMLINK whose path is 2^32 - 16 bytes; a handle of length 2^32 - 1.
  EXPECT_EQ(accept_stat(static_cast<std::uint32_t>(Proc::LOOKUP), words({0xfffffffc})), kGarbage);
  EXPECT_EQ(accept_stat(static_cast<std::uint32_t>(Proc::WRITE), words({0, 0, 16, 2, 0xffffffff})), kGarbage);
  EXPECT_EQ(accept_stat(static_cast<std::uint32_t>(Proc::SYMLINK), words({1, 'a' << 24, 0, 0, 0, 0, 0, 0, 0xfffffff0})),
            kGarbage);
  EXPECT_EQ(accept_stat(static_cast<std::uint32_t>(Proc::GETATTR), words({0xffffffff}, false)), kGarbage);
  // READDIR asking for a 4 GiB reply is answered within the server's limits.
  auto r = good_->try_call<READDIR3res>(Proc::READDIR, READDIR3args{root_, 0, {}, 0xffffffff});
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_EQ(r->status, NFS3_OK);
  still_served();
}

TEST_F(Hostile, CredentialsThatLieAboutTheirSizesAreBadcred) {
  auto call_with_cred = [&](std::vector<std::uint32_t> body) {
    std::vector<std::uint8_t> msg;
    xdr::Encoder e(msg);
    for (std::uint32_t w : {0x5151u, 0u, 2u, kProgram, kVersion, 0u, 1u, static_cast<std::uint32_t>(body.size() * 4)}) {
      e.u32(w);
    }
    for (auto w : body) e.u32(w);
    e.u32(0);  // verifier: AUTH_NONE
    e.u32(0);
    auto reply = raw_call(good_->nfs(), 0x5151, msg);
    if (!reply) return std::string("no reply: ") + reply.error().describe();
    xdr::Decoder d(*reply);
    auto h = rpc::decode_reply(d);
    return std::string(h && h->stat == rpc::ReplyStat::denied && h->reject == rpc::RejectStat::auth_error ? "badcred"
                                                                                                          : "other");
  };
  EXPECT_EQ(call_with_cred({1, 0xffffffff}), "badcred");                 // machinename "4 GiB" long
  EXPECT_EQ(call_with_cred({1, 0, 0, 0, 0xffffffff}), "badcred");        // 2^32 - 1 groups
  EXPECT_EQ(call_with_cred({1, 0, 0, 0, 17, 1, 2, 3}), "badcred");        // 17 groups (at most 16), and cut short
  still_served();
}

TEST_F(Hostile, AFloodOfOneByteFragmentsIsBounded) {
  auto fd = raw();
  std::vector<std::uint8_t> b;
  for (int i = 0; i < 200000; ++i) b.insert(b.end(), {0, 0, 0, 1, 0x42});  // 200,000 one-byte fragments
  ::send(fd.get(), b.data(), b.size(), MSG_NOSIGNAL);  // the server may hang up part way
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  still_served();
}

}  // namespace
}  // namespace nfsrdma::test
