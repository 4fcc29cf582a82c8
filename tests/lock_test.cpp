// Network locks on nfsrdma-server (NLM v4, NSM v1), spoken by hand over TCP
// from two client "hosts" (127.0.0.2 and 127.0.0.3): conflicts, ranges,
// real locks seen by processes on the server, blocking with GRANTED
// callbacks, CANCEL, bounds, the grace period after a restart, SM_NOTIFY both
// ways, shares and the _MSG forms.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "lib/nfs3/nlm4.hpp"
#include "lib/nfs3/nsm1.hpp"
#include "tests/nlm_peer.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nlm4;
using Bytes = std::vector<std::uint8_t>;
using namespace std::chrono_literals;

// One client host's lock manager, as a kernel client's lockd would speak.
class LockClient {
 public:
  LockClient(const std::string& host, std::uint16_t port, std::string source, std::string name)
      : name_(std::move(name)) {
    tcp::TcpClientOptions o;
    o.source_address = std::move(source);
    o.reserved_port = false;
    auto c = tcp::TcpClient::connect(host, port, o);
    if (!c) throw std::runtime_error(c.error().describe());
    conn_ = std::move(*c);
  }
  template <class Res, class Args>
  Res call(std::uint32_t prog, std::uint32_t vers, std::uint32_t proc, const Args& args) {
    Bytes a;
    xdr::encode(a, args);
    auto r = rpc::call_sync(*conn_, prog, vers, proc, a, rpc::AuthSys{0, "h", 0, 0, 0, {}}, 5000);
    if (!r) throw std::runtime_error(r.error().describe());
    Res res;
    if (!xdr::decode(*r, res).ok()) throw std::runtime_error("undecodable result");
    return res;
  }
  nlm4_lock alock(const nfs3::nfs_fh3& fh, std::int32_t svid, std::uint64_t off, std::uint64_t len) const {
    return {name_, {fh.bytes().begin(), fh.bytes().end()}, {'o', static_cast<std::uint8_t>(svid)}, svid, off, len};
  }
  nlm4_stats lock(const nfs3::nfs_fh3& fh, std::int32_t svid, std::uint64_t off, std::uint64_t len, bool excl,
                  bool block = false, bool reclaim = false) {
    nlm4_lockargs a{{1}, block, excl, alock(fh, svid, off, len), reclaim, 1};
    return call<nlm4_res>(kProgram, kVersion, 2, a).stat;
  }
  nlm4_stats unlock(const nfs3::nfs_fh3& fh, std::int32_t svid, std::uint64_t off, std::uint64_t len) {
    return call<nlm4_res>(kProgram, kVersion, 4, nlm4_unlockargs{{2}, alock(fh, svid, off, len)}).stat;
  }
  nlm4_testres test(const nfs3::nfs_fh3& fh, std::int32_t svid, std::uint64_t off, std::uint64_t len, bool excl) {
    return call<nlm4_testres>(kProgram, kVersion, 1, nlm4_testargs{{3}, excl, alock(fh, svid, off, len)});
  }
  nlm4_stats cancel(const nfs3::nfs_fh3& fh, std::int32_t svid, std::uint64_t off, std::uint64_t len, bool excl) {
    return call<nlm4_res>(kProgram, kVersion, 3, nlm4_cancargs{{4}, true, excl, alock(fh, svid, off, len)}).stat;
  }
  void raw(std::uint32_t prog, std::uint32_t proc, const Bytes& args) {
    auto r = rpc::call_sync(*conn_, prog, prog == kProgram ? kVersion : 1, proc, args, {}, 5000);
    if (!r) throw std::runtime_error(r.error().describe());
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<tcp::TcpClient> conn_;
};

class Locks : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    nlm_port_ = free_port();
    extra.insert(extra.end(), {"--nlm-port", std::to_string(nlm_port_), "--no-rdma"});
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{dir_.path() + " *(rw,no_root_squash)"}, extra);
    nfs_ = std::make_unique<Client>(*server_);
    root_ = nfs_->mount_root(dir_.path());
    file_ = nfs_->create(root_, "f");
    a_ = std::make_unique<LockClient>(test_server_host(), nlm_port_, "127.0.0.2", "host-a");
    b_ = std::make_unique<LockClient>(test_server_host(), nlm_port_, "127.0.0.3", "host-b");
  }
  void restart() {
    a_.reset();
    b_.reset();
    nfs_.reset();
    server_->kill_hard();
    // The same state directory: the NSM state and the clients holding locks survive.
    server_->start();
    a_ = std::make_unique<LockClient>(test_server_host(), nlm_port_, "127.0.0.2", "host-a");
    b_ = std::make_unique<LockClient>(test_server_host(), nlm_port_, "127.0.0.3", "host-b");
  }
  // fcntl on the server's own copy of the file, as a process there would.
  int local_lock(short type, off_t start, off_t len, int cmd = F_SETLK) {
    if (local_fd_ < 0) local_fd_ = ::open((dir_.path() + "/f").c_str(), O_RDWR);
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    return ::fcntl(local_fd_, cmd, &fl) == 0 ? 0 : errno;
  }
  void TearDown() override {
    if (local_fd_ >= 0) ::close(local_fd_);
    a_.reset();
    b_.reset();
    nfs_.reset();
    if (server_) {
      server_->stop();
      EXPECT_EQ(server_->log().find("ERROR"), std::string::npos) << server_->log();
    }
  }

  TempDir dir_;
  std::uint16_t nlm_port_ = 0;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> nfs_;
  nfs3::nfs_fh3 root_, file_;
  std::unique_ptr<LockClient> a_, b_;
  int local_fd_ = -1;
};

TEST_F(Locks, ConflictsBetweenHostsAndTestNamesTheHolder) {
  start();
  EXPECT_EQ(a_->lock(file_, 7, 0, 100, true), NLM4_GRANTED);
  EXPECT_EQ(a_->lock(file_, 7, 0, 100, true), NLM4_GRANTED);  // again: the same owner's
  EXPECT_EQ(b_->lock(file_, 7, 50, 10, false), NLM4_DENIED);  // same svid, other host: another owner
  auto t = b_->test(file_, 9, 90, 0, false);
  ASSERT_EQ(t.stat, NLM4_DENIED);
  EXPECT_TRUE(t.holder.exclusive);
  EXPECT_EQ(t.holder.svid, 7);
  EXPECT_EQ(t.holder.oh, (Bytes{'o', 7}));
  EXPECT_EQ(t.holder.l_offset, 0u);
  EXPECT_EQ(t.holder.l_len, 100u);
  EXPECT_EQ(b_->lock(file_, 9, 100, 10, true), NLM4_GRANTED);  // beyond it
  EXPECT_EQ(a_->lock(file_, 8, 0, 10, true), NLM4_DENIED);    // another owner on host a
  EXPECT_EQ(a_->unlock(file_, 7, 0, 0), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 9, 50, 10, false), NLM4_GRANTED);
  EXPECT_EQ(b_->test(file_, 9, 0, 0, true).stat, NLM4_GRANTED);  // its own locks never conflict
}

TEST_F(Locks, UpgradeDowngradeSplitAndMerge) {
  start();
  EXPECT_EQ(a_->lock(file_, 1, 0, 100, false), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 2, 0, 100, false), NLM4_GRANTED);  // shared with shared
  EXPECT_EQ(a_->lock(file_, 1, 0, 100, true), NLM4_DENIED);    // no upgrade while b reads
  EXPECT_EQ(b_->unlock(file_, 2, 0, 100), NLM4_GRANTED);
  EXPECT_EQ(a_->lock(file_, 1, 0, 100, true), NLM4_GRANTED);   // now the upgrade
  EXPECT_EQ(a_->unlock(file_, 1, 40, 20), NLM4_GRANTED);       // split: [0,40) and [60,100)
  EXPECT_EQ(b_->lock(file_, 2, 40, 20, true), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 2, 39, 1, false), NLM4_DENIED);
  EXPECT_EQ(b_->lock(file_, 2, 60, 1, false), NLM4_DENIED);
  EXPECT_EQ(b_->unlock(file_, 2, 0, 0), NLM4_GRANTED);
  EXPECT_EQ(a_->lock(file_, 1, 40, 20, false), NLM4_GRANTED);  // [0,40) W, [40,60) R, [60,100) W
  EXPECT_EQ(b_->lock(file_, 2, 45, 5, false), NLM4_GRANTED);   // reading the middle
  EXPECT_EQ(b_->lock(file_, 2, 30, 20, false), NLM4_DENIED);   // reaching into the written part
  EXPECT_EQ(b_->unlock(file_, 2, 0, 0), NLM4_GRANTED);
  EXPECT_EQ(a_->lock(file_, 1, 40, 20, true), NLM4_GRANTED);   // merged back into one
  auto t = b_->test(file_, 2, 50, 1, false);
  ASSERT_EQ(t.stat, NLM4_DENIED);
  EXPECT_EQ(t.holder.l_offset, 0u);
  EXPECT_EQ(t.holder.l_len, 100u);
}

TEST_F(Locks, ProcessesOnTheServerSeeTheSameLocks) {
  start();
  EXPECT_EQ(a_->lock(file_, 1, 0, 10, true), NLM4_GRANTED);
  EXPECT_EQ(local_lock(F_RDLCK, 5, 1), EAGAIN);
  EXPECT_EQ(local_lock(F_WRLCK, 20, 10), 0);
  auto t = a_->test(file_, 1, 25, 1, false);
  ASSERT_EQ(t.stat, NLM4_DENIED);
  EXPECT_EQ(t.holder.svid, ::getpid());
  EXPECT_EQ(t.holder.l_offset, 20u);
  EXPECT_EQ(a_->lock(file_, 1, 25, 1, false), NLM4_DENIED);
  EXPECT_EQ(local_lock(F_UNLCK, 0, 0), 0);
  EXPECT_EQ(a_->lock(file_, 1, 25, 1, false), NLM4_GRANTED);
}

TEST_F(Locks, EachClientIsBounded) {
  const std::uint16_t metrics = free_port();
  start({"--max-locks-per-client", "8", "--metrics", "127.0.0.1:" + std::to_string(metrics)});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a_->lock(file_, 1, 10 * i, 5, true), NLM4_GRANTED) << i;
  EXPECT_EQ(a_->lock(file_, 1, 1000, 5, true), NLM4_DENIED_NOLOCKS);
  EXPECT_EQ(a_->lock(file_, 1, 0, 5, false), NLM4_GRANTED);  // a downgrade adds nothing
  EXPECT_EQ(b_->lock(file_, 2, 1000, 5, true), NLM4_GRANTED);  // the other client is not affected
  EXPECT_EQ(metric(scrape(metrics), "nfsrdma_server_lock_ranges"), 9);
  EXPECT_EQ(a_->unlock(file_, 1, 70, 5), NLM4_GRANTED);
  EXPECT_EQ(a_->lock(file_, 1, 2000, 5, true), NLM4_GRANTED);
  EXPECT_EQ(a_->unlock(file_, 1, 0, 0), NLM4_GRANTED);
  EXPECT_EQ(metric(scrape(metrics), "nfsrdma_server_lock_ranges"), 1);
}

// A client host's NLM and NSM behind its portmapper, answering GRANTED with
// `granted_answer` and keeping every call.
std::unique_ptr<PeerHost> peer_at(const std::string& address, nlm4_stats granted_answer = NLM4_GRANTED) {
  auto p = std::make_unique<PeerHost>(address, [granted_answer](const PeerHost::Call& c) {
    Bytes out;
    if (c.prog == kProgram && c.proc == static_cast<std::uint32_t>(Proc::GRANTED)) {
      nlm4_testargs g;
      if (!xdr::decode(c.args, g).ok()) return std::optional<Bytes>{};
      xdr::encode(out, nlm4_res{g.cookie, granted_answer});
    }
    return std::optional<Bytes>(out);
  });
  return p;
}

#define REQUIRE_PEER(p) \
  if (!(p)->valid()) GTEST_SKIP() << "cannot listen on " << (p)->address() << ":111 (an rpcbind on every address?)"

TEST_F(Locks, ABlockedLockIsGrantedThroughTheCallback) {
  start();
  auto host_b = peer_at("127.0.0.3");
  REQUIRE_PEER(host_b);
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 2, 10, 10, true, /*block=*/true), NLM4_BLOCKED);
  EXPECT_EQ(b_->lock(file_, 2, 10, 10, true, true), NLM4_BLOCKED);  // asking again queues nothing more
  EXPECT_FALSE(host_b->wait_for(kProgram, 5, 300));
  EXPECT_EQ(a_->unlock(file_, 1, 0, 0), NLM4_GRANTED);
  auto g = host_b->wait_for(kProgram, static_cast<std::uint32_t>(Proc::GRANTED), 5000);
  ASSERT_TRUE(g) << server_->log();
  nlm4_testargs args;
  ASSERT_TRUE(xdr::decode(g->args, args).ok());
  EXPECT_EQ(args.cookie, Bytes{1});
  EXPECT_EQ(args.alock.svid, 2);
  EXPECT_EQ(args.alock.l_offset, 10u);
  EXPECT_EQ(args.alock.l_len, 10u);
  EXPECT_TRUE(args.exclusive);
  EXPECT_EQ(a_->lock(file_, 1, 15, 1, false), NLM4_DENIED);  // b holds it now
  EXPECT_EQ(b_->lock(file_, 2, 10, 10, true, true), NLM4_GRANTED);  // a client asking again is told
}

TEST_F(Locks, AGrantTheClientRefusesIsReleased) {
  start();
  auto host_b = peer_at("127.0.0.3", NLM4_DENIED);
  REQUIRE_PEER(host_b);
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true, true), NLM4_BLOCKED);
  EXPECT_EQ(a_->unlock(file_, 1, 0, 0), NLM4_GRANTED);
  ASSERT_TRUE(host_b->wait_for(kProgram, static_cast<std::uint32_t>(Proc::GRANTED), 5000));
  bool free = false;
  for (int i = 0; i < 50 && !free; ++i, std::this_thread::sleep_for(20ms)) free = a_->test(file_, 1, 0, 0, true).stat == NLM4_GRANTED;
  EXPECT_TRUE(free) << "the refused grant still holds";
}

TEST_F(Locks, CancelTakesAQueuedLockOut) {
  start();
  auto host_b = peer_at("127.0.0.3");
  REQUIRE_PEER(host_b);
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true, true), NLM4_BLOCKED);
  EXPECT_EQ(b_->cancel(file_, 2, 0, 0, true), NLM4_GRANTED);
  EXPECT_EQ(a_->unlock(file_, 1, 0, 0), NLM4_GRANTED);
  EXPECT_FALSE(host_b->wait_for(kProgram, static_cast<std::uint32_t>(Proc::GRANTED), 1500));
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
}

TEST_F(Locks, AProcessOnTheServerUnlockingWakesAWaiter) {
  start();
  auto host_b = peer_at("127.0.0.3");
  REQUIRE_PEER(host_b);
  EXPECT_EQ(local_lock(F_WRLCK, 0, 0), 0);
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, false, true), NLM4_BLOCKED);
  EXPECT_EQ(local_lock(F_UNLCK, 0, 0), 0);
  EXPECT_TRUE(host_b->wait_for(kProgram, static_cast<std::uint32_t>(Proc::GRANTED), 5000));
  EXPECT_EQ(local_lock(F_WRLCK, 0, 0), EAGAIN);
}

TEST_F(Locks, WaitersAndCallbacksAreBounded) {
  start();
  // Host b answers nothing: no portmapper, no NLM. Its blocked locks are
  // bounded, and the others' calls are served throughout.
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  int blocked = 0, refused = 0;
  for (int i = 0; i < 100; ++i) {
    auto s = b_->lock(file_, 100 + i, 0, 0, true, true);
    blocked += s == NLM4_BLOCKED;
    refused += s == NLM4_DENIED_NOLOCKS;
  }
  EXPECT_EQ(blocked, 64);
  EXPECT_EQ(refused, 36);
  EXPECT_EQ(a_->unlock(file_, 1, 0, 0), NLM4_GRANTED);  // one of b's waiters gets it; telling b fails
  std::this_thread::sleep_for(200ms);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a_->test(file_, 1, 0, 0, false).stat, NLM4_DENIED);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST_F(Locks, AfterARestartClientsAreToldAndReclaimInTheGracePeriod) {
  start({"--grace", "3"});
  auto host_a = peer_at("127.0.0.2");
  REQUIRE_PEER(host_a);
  EXPECT_EQ(a_->lock(file_, 1, 0, 10, true), NLM4_GRANTED);
  nsm1::sm_stat_res before = a_->call<nsm1::sm_stat_res>(nsm1::kProgram, 1, 1, nsm1::sm_name{"x"});
  EXPECT_EQ(before.state % 2, 1);
  restart();
  auto n = host_a->wait_for(nsm1::kProgram, static_cast<std::uint32_t>(nsm1::Proc::NOTIFY), 5000);
  ASSERT_TRUE(n) << server_->log();
  nsm1::stat_chge chg;
  ASSERT_TRUE(xdr::decode(n->args, chg).ok());
  EXPECT_GT(chg.state, before.state);
  EXPECT_EQ(chg.state % 2, 1);
  // In the grace period: b's new lock waits for reclaims; a's reclaim holds.
  EXPECT_EQ(b_->lock(file_, 2, 0, 10, true), NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(b_->test(file_, 2, 0, 10, true).stat, NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(a_->lock(file_, 1, 0, 10, true, false, /*reclaim=*/true), NLM4_GRANTED);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(b_->lock(file_, 2, 0, 10, true), NLM4_DENIED);  // after it: exactly as before
  EXPECT_EQ(b_->lock(file_, 2, 10, 10, true), NLM4_GRANTED);
}

TEST_F(Locks, AClientsNotifyReleasesWhatItHeld) {
  start();
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  Bytes args;
  xdr::encode(args, nsm1::stat_chge{"host-b", 3});
  a_->raw(nsm1::kProgram, 6, args);  // a notify naming another host, from a: nothing
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true), NLM4_DENIED);
  args.clear();
  xdr::encode(args, nsm1::stat_chge{"host-a", 3});
  a_->raw(nsm1::kProgram, 6, args);  // host a restarted
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true), NLM4_GRANTED);
}

// FREE_ALL comes from this host's status monitor (every 127/8 address is
// this host; interop/locks_netns_test.sh sends one from another host).
TEST_F(Locks, FreeAllReleasesTheHostItNames) {
  start();
  EXPECT_EQ(a_->lock(file_, 1, 0, 0, true), NLM4_GRANTED);
  Bytes args;
  xdr::encode(args, nlm4_notify{"host-c", 5});
  b_->raw(kProgram, static_cast<std::uint32_t>(Proc::FREE_ALL), args);
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true), NLM4_DENIED);
  args.clear();
  xdr::encode(args, nlm4_notify{"host-a", 5});
  b_->raw(kProgram, static_cast<std::uint32_t>(Proc::FREE_ALL), args);
  EXPECT_EQ(b_->lock(file_, 2, 0, 0, true), NLM4_GRANTED);
}

TEST_F(Locks, SharesDenyWhatTheyName) {
  start();
  auto share = [&](LockClient& c, std::uint8_t oh, fsh4_mode mode, fsh4_access access, std::uint32_t proc = 20) {
    nlm4_shareargs a{{9}, {c.name(), {file_.bytes().begin(), file_.bytes().end()}, {oh}, mode, access}, false};
    return c.call<nlm4_shareres>(kProgram, kVersion, proc, a).stat;
  };
  EXPECT_EQ(share(*a_, 1, fsh4_mode::fsm_DW, fsh4_access::fsa_RW), NLM4_GRANTED);
  EXPECT_EQ(share(*b_, 2, fsh4_mode::fsm_DN, fsh4_access::fsa_W), NLM4_DENIED);
  EXPECT_EQ(share(*b_, 2, fsh4_mode::fsm_DN, fsh4_access::fsa_R), NLM4_GRANTED);
  EXPECT_EQ(share(*b_, 3, fsh4_mode::fsm_DR, fsh4_access::fsa_R), NLM4_DENIED);  // a reads
  EXPECT_EQ(share(*a_, 1, fsh4_mode::fsm_DN, fsh4_access::fsa_NONE, 21), NLM4_GRANTED);  // UNSHARE
  EXPECT_EQ(share(*b_, 3, fsh4_mode::fsm_DN, fsh4_access::fsa_W), NLM4_GRANTED);
}

TEST_F(Locks, MessageFormsAnswerThroughTheClientsResProcedure) {
  start();
  auto host_a = peer_at("127.0.0.2");
  REQUIRE_PEER(host_a);
  Bytes args;
  xdr::encode(args, nlm4_lockargs{{7, 7}, false, true, a_->alock(file_, 1, 0, 0), false, 1});
  a_->raw(kProgram, static_cast<std::uint32_t>(Proc::LOCK_MSG), args);
  auto r = host_a->wait_for(kProgram, static_cast<std::uint32_t>(Proc::LOCK_RES), 5000);
  ASSERT_TRUE(r);
  nlm4_res res;
  ASSERT_TRUE(xdr::decode(r->args, res).ok());
  EXPECT_EQ(res.cookie, (Bytes{7, 7}));
  EXPECT_EQ(res.stat, NLM4_GRANTED);
  args.clear();
  xdr::encode(args, nlm4_testargs{{8}, true, a_->alock(file_, 2, 0, 0)});
  a_->raw(kProgram, static_cast<std::uint32_t>(Proc::TEST_MSG), args);
  r = host_a->wait_for(kProgram, static_cast<std::uint32_t>(Proc::TEST_RES), 5000);
  ASSERT_TRUE(r);
  nlm4_testres t;
  ASSERT_TRUE(xdr::decode(r->args, t).ok());
  EXPECT_EQ(t.stat, NLM4_DENIED);
  EXPECT_EQ(t.holder.svid, 1);
}

TEST_F(Locks, BadArgumentsAreRefusedAndNothingIsLost) {
  start();
  EXPECT_EQ(a_->lock(file_, 1, 0, 10, true), NLM4_GRANTED);
  nfs3::nfs_fh3 junk = file_;
  junk.data[junk.len - 1] ^= 0xff;
  EXPECT_EQ(a_->lock(junk, 1, 0, 10, true), NLM4_STALE_FH);
  EXPECT_EQ(a_->lock(file_, 1, 1ull << 63, 10, true), NLM4_FBIG);
  EXPECT_EQ(a_->lock(root_, 1, 0, 10, true), NLM4_FAILED);  // a directory
  EXPECT_THROW(a_->raw(kProgram, 2, Bytes{0, 0, 0, 9}), std::runtime_error);  // garbage
  EXPECT_EQ(b_->lock(file_, 2, 0, 10, false), NLM4_DENIED);  // a's lock stands
}

}  // namespace
}  // namespace nfsrdma::test
