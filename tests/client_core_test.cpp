// client/core against the real server, over RPC-RDMA (tcp provider) and TCP:
// mounting and its errors, data both ways, reconnect + retransmit when the
// server dies under 64 calls in flight, a link that cannot connect beside
// one that can (multi-rail), caller-driven progress, and a killed process's
// calls cancelled.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "client/core/nfs_client.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;
using client::NfsClient;
using client::NfsClientOptions;
using client::Proto;

class ClientCore : public ::testing::TestWithParam<Proto> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    std::filesystem::create_directory(dir_.path() + "/closed");
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        dir_.path() + " " + test_client_host() + "(rw,no_root_squash)", dir_.path() + "/closed 127.0.0.2(rw)"});
  }
  void TearDown() override {
    if (server_ && HasFailure()) std::cerr << "server log:\n" << server_->log();
  }
  NfsClientOptions options(const std::string& path) {
    NfsClientOptions o;
    o.host = test_server_host();
    o.export_path = path;
    o.proto = GetParam();
    o.port = GetParam() == Proto::rdma ? server_->rdma_port() : server_->nfs_port();
    o.mount_port = server_->mount_port();
    o.provider = test_provider();
    return o;
  }

  void write_file(const std::vector<std::uint8_t>& data) {
    std::ofstream f(dir_.path() + "/file", std::ios::binary);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }

  static nfs_fh3 file_handle(NfsClient& nfs) {
    auto lk = nfs.call_sync<LOOKUP3res>(Proc::LOOKUP, diropargs3{nfs.root(), "file"});
    EXPECT_TRUE(lk.ok() && lk->status == NFS3_OK);
    return lk.ok() ? lk->object : nfs_fh3{};
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_P(ClientCore, WritesAndReadsFilesAndDirectories) {
  auto c = NfsClient::connect(options(dir_.path()));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  auto attr = nfs.call_sync<GETATTR3res>(Proc::GETATTR, FhArgs{nfs.root()});
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->obj_attributes.type, NF3DIR);
  CREATE3args ca;
  ca.where = {nfs.root(), "data"};
  ca.obj_attributes.mode = 0644;
  auto cr = nfs.call_sync<CreateRes>(Proc::CREATE, ca);
  ASSERT_TRUE(cr.ok() && cr->status == NFS3_OK);
  std::vector<std::uint8_t> data(3 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 + (i >> 12));
  for (std::size_t off = 0; off < data.size(); off += 1 << 20) {
    auto w = nfs.write_sync(WRITE3args{*cr->obj, off, 1u << 20, stable_how::UNSTABLE,
                                       std::span(data).subspan(off, 1 << 20)});
    ASSERT_TRUE(w.ok() && w->status == NFS3_OK) << (w ? nfsstat3_name(w->status) : w.error().describe());
  }
  auto commit = nfs.call_sync<COMMIT3res>(Proc::COMMIT, COMMIT3args{*cr->obj, 0, 0});
  ASSERT_TRUE(commit.ok() && commit->status == NFS3_OK);
  std::vector<std::uint8_t> back(data.size());
  for (std::size_t off = 0; off < back.size(); off += 1 << 20) {
    auto n = nfs.read_sync(*cr->obj, off, std::span(back).subspan(off, 1 << 20));
    ASSERT_TRUE(n.ok()) << n.error().describe();
    EXPECT_EQ(*n, 1u << 20);
  }
  EXPECT_TRUE(back == data);
  for (int i = 0; i < 300; ++i) std::ofstream(dir_.path() + "/f" + std::to_string(i));
  auto rd = nfs.call_sync<READDIRPLUS3res>(Proc::READDIRPLUS, READDIRPLUS3args{nfs.root(), 0, {}, 65536, 65536});
  ASSERT_TRUE(rd.ok() && rd->status == NFS3_OK);
  EXPECT_EQ(rd->entries.size(), 304u);  // 300 + data + closed + . + ..
  EXPECT_TRUE(rd->eof);
}

TEST_P(ClientCore, RegisteredBuffersReadAndWriteInPlace) {
  auto c = NfsClient::connect(options(dir_.path()));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  std::vector<std::uint8_t> region(4 << 20);
  ASSERT_TRUE(nfs.register_memory(region).ok());
  CREATE3args ca;
  ca.where = {nfs.root(), "zc"};
  auto cr = nfs.call_sync<CreateRes>(Proc::CREATE, ca);
  ASSERT_TRUE(cr.ok() && cr->status == NFS3_OK);
  for (std::size_t i = 0; i < (2u << 20); ++i) region[i] = static_cast<std::uint8_t>(i * 3 + (i >> 10));
  for (std::size_t off = 0; off < (2u << 20); off += 65536) {  // 64 KiB and 1 MiB sized calls alike
    auto w = nfs.write_sync(WRITE3args{*cr->obj, off, 65536, stable_how::FILE_SYNC, std::span(region).subspan(off, 65536)});
    ASSERT_TRUE(w.ok() && w->status == NFS3_OK);
  }
  for (std::size_t off = 0; off < (2u << 20); off += 1 << 20) {
    bool eof = false;
    auto n = nfs.read_sync(*cr->obj, off, std::span(region).subspan((2u << 20) + off, 1 << 20), &eof);
    ASSERT_TRUE(n.ok()) << n.error().describe();
    EXPECT_EQ(*n, 1u << 20);
  }
  EXPECT_TRUE(std::equal(region.begin(), region.begin() + (2 << 20), region.begin() + (2 << 20)));
  std::vector<std::uint8_t> unregistered(100);
  bool eof = false;
  auto tail = nfs.read_sync(*cr->obj, (2u << 20) - 10, unregistered, &eof);  // a short read, not registered
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, 10u);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(std::equal(unregistered.begin(), unregistered.begin() + 10, region.begin() + (2 << 20) - 10));
}

TEST_P(ClientCore, MountErrorsAreClear) {
  auto refused = NfsClient::connect(options(dir_.path() + "/closed"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("access denied by server"), std::string::npos) << refused.error().message;
  auto missing = NfsClient::connect(options("/not/exported"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no such export"), std::string::npos) << missing.error().message;
  NfsClientOptions nowhere = options(dir_.path());
  nowhere.mount_port = free_port();
  auto unreachable = NfsClient::connect(nowhere);
  ASSERT_FALSE(unreachable.ok());
  EXPECT_NE(unreachable.error().message.find("connect"), std::string::npos) << unreachable.error().message;
}

TEST_P(ClientCore, ReconnectsAndRetransmitsWhenTheServerDies) {
  std::vector<std::uint8_t> data(64 * 65536);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 11 + (i >> 16));
  write_file(data);
  NfsClientOptions o = options(dir_.path());
  o.timeo_ds = 20;  // 2 s: a call with no answer forces a reconnect
  auto c = NfsClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  const nfs_fh3 fh = file_handle(nfs);
  ASSERT_NE(fh.len, 0u);

  std::mutex mu;
  std::condition_variable cv;
  int left = 64, bad = 0;
  std::vector<std::uint8_t> got(data.size());
  server_->kill_hard();  // the 64 READs go out to a dead server...
  for (int i = 0; i < 64; ++i) {
    nfs.call<READ3res>(Proc::READ, READ3args{fh, std::uint64_t{65536} * i, 65536}, [&, i](Result<READ3res> r) {
      std::lock_guard g(mu);
      if (!r || r->status != NFS3_OK || r->data.size() != 65536) {
        ++bad;
      } else {
        std::memcpy(got.data() + std::size_t{65536} * i, r->data.data(), 65536);
      }
      if (--left == 0) cv.notify_all();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server_->start();  // ...which comes back on the same ports with the same handles
  std::unique_lock g(mu);
  ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(60), [&] { return left == 0; })) << left << " calls never completed";
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(got == data);
  EXPECT_GE(nfs.reconnects(), 1u);
}

// Multi-rail with one server address where nothing answers: the client
// connects on the link that works, every call goes there, and the other
// stays down, retried in the background.
TEST_P(ClientCore, CarriesOnOverTheLinksThatWork) {
  NfsClientOptions o = options(dir_.path());
  o.remote_addrs = {test_server_host(), "127.0.0.9"};
  auto c = NfsClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  for (int i = 0; i < 20; ++i) {
    auto r = nfs.call_sync<GETATTR3res>(Proc::GETATTR, FhArgs{nfs.root()});
    ASSERT_TRUE(r.ok() && r->status == NFS3_OK) << i;
  }
  auto links = nfs.links();
  ASSERT_EQ(links.size(), 2u);
  EXPECT_TRUE(links[0].up);
  EXPECT_FALSE(links[1].up);
  EXPECT_EQ(links[1].remote, "127.0.0.9");
  EXPECT_GE(links[0].calls, 20u);
  EXPECT_EQ(links[1].calls, 0u);
  // Both addresses unreachable: the mount fails, naming why.
  o.remote_addrs = {"127.0.0.9", "127.0.0.10"};
  auto none = NfsClient::connect(o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("127.0.0.9"), std::string::npos) << none.error().message;
}

// NfsClientOptions::caller_progress: replies wait for progress() and their
// callbacks run on the thread that calls it; call_sync drives itself; a
// reconnect under calls in flight still completes them.
TEST_P(ClientCore, CallerDrivenProgressRunsCallbacksOnTheCallersThread) {
  NfsClientOptions o = options(dir_.path());
  o.caller_progress = true;
  o.timeo_ds = 20;
  std::vector<std::uint8_t> data(16 * 4096);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 5 + (i >> 12));
  write_file(data);
  auto c = NfsClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  auto lk = nfs.call_sync<LOOKUP3res>(Proc::LOOKUP, diropargs3{nfs.root(), "file"});
  ASSERT_TRUE(lk.ok() && lk->status == NFS3_OK);
  std::vector<std::uint8_t> got(data.size());
  ASSERT_TRUE(nfs.register_memory(got).ok());
  int left = 0, bad = 0, elsewhere = 0;
  const auto me = std::this_thread::get_id();
  auto read_all = [&] {
    left = 16;
    for (int i = 0; i < 16; ++i) {
      nfs.read(lk->object, 4096u * i, std::span(got).subspan(4096u * i, 4096), [&](Result<NfsClient::ReadResult> r) {
        if (!r || r->status != NFS3_OK || r->count != 4096) ++bad;
        if (std::this_thread::get_id() != me) ++elsewhere;
        --left;
      });
    }
  };
  auto drive = [&](int seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (left > 0 && std::chrono::steady_clock::now() < until) nfs.progress(100);
  };
  read_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(left, 16) << "replies were handled with nobody driving progress";
  drive(10);
  EXPECT_EQ(left, 0);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(elsewhere, 0);
  EXPECT_TRUE(got == data);

  std::fill(got.begin(), got.end(), 0);
  server_->kill_hard();
  read_all();
  drive(1);
  server_->start();
  drive(60);
  EXPECT_EQ(left, 0) << left << " calls never completed";
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(elsewhere, 0);
  EXPECT_TRUE(got == data);
  EXPECT_GE(nfs.reconnects(), 1u);
}

// Caller-driven over several connections (the fio engine's nfs_nconnect):
// progress(timeout) waits on all of them at once, so it returns with the
// reply of a lone call whichever connection carried it, not after a short
// wait on another (that took fio's depth-1 reads from 14k to 950 a second).
TEST_P(ClientCore, CallerDrivenProgressWaitsOnEveryConnection) {
  NfsClientOptions o = options(dir_.path());
  o.caller_progress = true;
  o.nconnect = 2;
  write_file(std::vector<std::uint8_t>(4096, 7));
  auto c = NfsClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  const nfs_fh3 fh = file_handle(nfs);
  std::vector<std::uint8_t> got(4096);
  for (int i = 0; i < 20; ++i) {
    // Calls and waits each take connections in turn: a look with nothing
    // in flight every other time, so the two turns do not stay in step.
    if (i % 2) {
      EXPECT_EQ(nfs.progress(0), 0u);
    }
    bool done = false;
    nfs.read(fh, 0, got, [&](Result<NfsClient::ReadResult> r) {
      EXPECT_TRUE(r && r->status == NFS3_OK && r->count == 4096);
      done = true;
    });
    // A long wait comes back with work done (the reply, or on RDMA maybe a
    // send's completion first), never empty-handed while the reply is due.
    int empty = 0;
    while (!done && empty < 100) {
      if (nfs.progress(10'000) == 0) ++empty;
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(empty, 0) << "call " << i << ": progress() came back with nothing done while its reply was due";
  }
  EXPECT_EQ(got, std::vector<std::uint8_t>(4096, 7));
}

// cancel_calls_of (a FUSE request's process killed): with the server stopped,
// each of that process's calls ends once, with EINTR, whether its buffer is
// open to the server (a READ: over RDMA answered once the connection is
// shut) or not; another process's calls wait and complete when the server
// goes on; the process's new calls fail at once until release_owner.
TEST_P(ClientCore, CancelledCallsEndOnceWithEintr) {
  std::vector<std::uint8_t> data(8 * 4096, 0x6b);
  write_file(data);
  // Before the client: its destructor ends calls left, whose callbacks use these.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> ended(16, 0), eintr(16, 0), ok(16, 0);
  std::vector<std::string> how(16);
  std::vector<std::uint8_t> got(data.size());
  auto finish = [&](int i, bool is_ok, bool is_eintr) {
    std::lock_guard g(mu);
    ++ended[i];
    eintr[i] += is_eintr;
    ok[i] += is_ok;
    cv.notify_all();
  };
  auto c = NfsClient::connect(options(dir_.path()));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  const nfs_fh3 fh = file_handle(nfs);
  ASSERT_NE(fh.len, 0u);
  ASSERT_TRUE(nfs.register_memory(got).ok());  // over RDMA the server may write there: open to it

  auto paused = server_->pause();
  ASSERT_TRUE(paused);
  for (int i = 0; i < 16; ++i) {
    client::CallOwner as(i < 12 ? 4242 : 4343);
    if (i % 2 == 0) {
      nfs.read(fh, 4096u * (i / 2), std::span(got).subspan(4096u * (i / 2), 4096),
               [&, i](Result<NfsClient::ReadResult> r) {
                 how[i] = r ? std::string(nfsstat3_name(r->status)) : r.error().describe();
                 finish(i, r && r->status == NFS3_OK && r->count == 4096, !r && r.error().code == EINTR);
               });
    } else {
      nfs.call<GETATTR3res>(Proc::GETATTR, FhArgs{fh}, [&, i](Result<GETATTR3res> r) {
        how[i] = r ? std::string(nfsstat3_name(r->status)) : r.error().describe();
        finish(i, r && r->status == NFS3_OK, !r && r.error().code == EINTR);
      });
    }
  }
  EXPECT_TRUE(nfs.has_calls_of(4242));
  nfs.cancel_calls_of(4242);
  auto settled = [&](int upto) { return std::all_of(ended.begin(), ended.begin() + upto, [](int n) { return n > 0; }); };
  {
    std::unique_lock g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(30), [&] { return settled(12); })) << "cancelled calls never ended";
  }
  EXPECT_FALSE(nfs.has_calls_of(4242));
  {
    client::CallOwner as(4242);
    auto r = nfs.call_sync<GETATTR3res>(Proc::GETATTR, FhArgs{fh});
    EXPECT_TRUE(!r.ok() && r.error().code == EINTR) << "a cancelled process's new call went out";
  }
  paused.resume();
  {
    std::unique_lock g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(60), [&] { return settled(16); })) << "calls never completed";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a second ending would come meanwhile
  std::lock_guard g(mu);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(ended[i], 1) << "call " << i;
    EXPECT_EQ(i < 12 ? eintr[i] : ok[i], 1) << "call " << i << (i < 12 ? " (cancelled): " : ": ") << how[i];
  }
  nfs.release_owner(4242);
  client::CallOwner as(4242);
  auto r = nfs.call_sync<GETATTR3res>(Proc::GETATTR, FhArgs{fh});
  EXPECT_TRUE(r.ok() && r->status == NFS3_OK);
}

// A cancelled call still waiting for RPC-RDMA credits goes out later as it
// was made: the transport reads it from the call's record, which is not
// reused until the transport is done with it. With one credit and the server
// stopped, a process's GETATTRs wait in the transport and are cancelled,
// then another process's READs are made (taking ended records first): the
// server gets 8 GETATTRs and 8 READs, not READs in the GETATTRs' place.
TEST_P(ClientCore, CancelledCallsWaitingForCreditsGoOutAsMade) {
  std::vector<std::uint8_t> data(8 * 4096, 0x3c);
  write_file(data);
  const std::uint16_t metrics_port = free_port();
  server_ = std::make_unique<ServerProcess>(
      std::vector<std::string>{dir_.path() + " " + test_client_host() + "(rw,no_root_squash)"},
      std::vector<std::string>{"--metrics", "127.0.0.1:" + std::to_string(metrics_port)});
  // Before the client: its destructor ends calls left, whose callbacks use these.
  std::mutex mu;
  std::condition_variable cv;
  int cancelled = 0, read_ok = 0;
  std::vector<std::uint8_t> got(data.size());  // not registered: the READs' buffers are not open to the server
  NfsClientOptions o = options(dir_.path());
  o.credits = 1;
  auto c = NfsClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  NfsClient& nfs = **c;
  const nfs_fh3 fh = file_handle(nfs);
  ASSERT_NE(fh.len, 0u);
  auto served = [&](const char* proc) {
    return metric(scrape(metrics_port), std::string("nfsrdma_server_calls_total{program=\"NFS\",proc=\"") + proc + "\"}");
  };
  const double getattrs_before = served("GETATTR");

  // Stopped before the calls: a server still running would answer some.
  auto paused = server_->pause();
  ASSERT_TRUE(paused);
  for (int i = 0; i < 8; ++i) {
    client::CallOwner as(4242);
    nfs.call<GETATTR3res>(Proc::GETATTR, FhArgs{fh}, [&](Result<GETATTR3res> r) {
      std::lock_guard g(mu);
      cancelled += !r && r.error().code == EINTR;
      cv.notify_all();
    });
  }
  nfs.cancel_calls_of(4242);
  {
    std::unique_lock g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(30), [&] { return cancelled == 8; })) << "cancelled calls never ended";
  }
  for (int i = 0; i < 8; ++i) {
    client::CallOwner as(4343);
    nfs.read(fh, 4096u * i, std::span(got).subspan(4096u * i, 4096), [&](Result<NfsClient::ReadResult> r) {
      std::lock_guard g(mu);
      read_ok += r && r->status == NFS3_OK && r->count == 4096;
      cv.notify_all();
    });
  }
  paused.resume();
  {
    std::unique_lock g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(60), [&] { return read_ok == 8; })) << "READs never completed";
  }
  EXPECT_EQ(got, data);
  // The cancelled GETATTRs' replies come back after the READs' at the latest.
  for (int i = 0; i < 100 && served("GETATTR") - getattrs_before < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(served("GETATTR") - getattrs_before, 8);
  EXPECT_EQ(served("READ"), 8);
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientCore, ::testing::Values(Proto::rdma, Proto::tcp),
                         [](const auto& p) { return p.param == Proto::rdma ? "rdma" : "tcp"; });

}  // namespace
}  // namespace nfsrdma::test
