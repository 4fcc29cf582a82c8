// What one client can make the server hold, over TCP: a client that never
// reads its replies, idle connections, too many connections from one
// address, a record cut into one-byte fragments, text meant to forge log
// lines. Each is bounded, and a well-behaved client is served throughout.
// (RPC-over-RDMA's side is in rdma_hostile_test.cpp.)
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "lib/nfs3/mount3.hpp"
#include "lib/transport/tcp/socket.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

class Bounds : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root";
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{dir_.path() + " 127.0.0.0/8(rw,no_root_squash,insecure)"}, std::move(extra));
    good_ = std::make_unique<Client>(*server_);
    root_ = good_->mount_root(dir_.path());
  }
  void TearDown() override {
    if (server_ && HasFailure()) std::cerr << server_->log();
  }
  void still_served() { EXPECT_EQ(good_->getattr(root_).type, NF3DIR); }

  // A plain connection to the NFS port.
  Fd raw(const char* source = "127.0.0.1", int rcvbuf = 0) {
    Fd fd = connect_raw("127.0.0.1", server_->nfs_port(), {.source = source, .rcvbuf = rcvbuf});
    EXPECT_TRUE(fd.valid());
    return fd;
  }
  static bool put(int fd, const std::vector<std::uint8_t>& b) {
    return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  // Reads one reply record; returns its xid, or 0 if the connection gave none.
  static std::uint32_t reply_xid(int fd) {
    std::uint8_t head[8];
    std::size_t got = 0;
    while (got < sizeof head) {
      ssize_t n = ::recv(fd, head + got, sizeof head - got, 0);
      if (n <= 0) return 0;
      got += static_cast<std::size_t>(n);
    }
    std::uint32_t len = ((head[0] & 0x7fu) << 24) | (head[1] << 16) | (head[2] << 8) | head[3];
    std::vector<std::uint8_t> rest(len - 4);
    for (std::size_t at = 0; at < rest.size();) {
      ssize_t n = ::recv(fd, rest.data() + at, rest.size() - at, 0);
      if (n <= 0) return 0;
      at += static_cast<std::size_t>(n);
    }
    return (std::uint32_t{head[4]} << 24) | (head[5] << 16) | (head[6] << 8) | head[7];
  }
  // A NULL call on a raw connection is answered.
  static bool answers(int fd) {
    static std::atomic<std::uint32_t> xid{0x7000};
    const std::uint32_t x = ++xid;
    return put(fd, record(make_call(x, kProgram, kVersion, 0, {}))) && reply_xid(fd) == x;
  }
  static bool hung_up(int fd) {
    char byte;
    ssize_t n = ::recv(fd, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  std::size_t log_lines_with(const std::string& what) {
    std::istringstream in(server_->log());
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
    return n;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> good_;
  nfs_fh3 root_;
};

// The report this suite began from: 600 READs of 1 MiB on one connection
// whose client reads nothing grew the server from 12 MB to 610 MB. Now the
// connection stops being read once its calls and queued replies hold 16 MiB.
TEST_F(Bounds, AClientThatNeverReadsItsRepliesHoldsABoundedAmount) {
  start();
  const std::string data(1 << 20, 'r');
  nfs_fh3 fh = good_->create(root_, "big");
  good_->write(fh, 0, data);
  ASSERT_EQ(good_->read(fh, 0, 1 << 20), data);  // the heap as normal service leaves it
  const long before = rss_kib(server_->pid());
  Fd hog = raw("127.0.0.1", 4096);
  std::atomic<int> sent{0};
  std::thread flood([&] {
    for (std::uint32_t i = 0; i < 600; ++i) {
      std::vector<std::uint8_t> args;
      xdr::encode(args, READ3args{fh, 0, 1 << 20});
      if (!put(hog.get(), record(make_call(0x9000 + i, kProgram, kVersion, 6, args)))) break;
      ++sent;
    }
  });
  long peak = before;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(good_->read(fh, 0, 1 << 20), data);  // served throughout
    peak = std::max(peak, rss_kib(server_->pid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  flood.join();
  std::printf("never-reading client: %d READs of 1 MiB sent; server RSS %ld KiB before, peak %ld KiB (+%ld KiB)\n",
              sent.load(), before, peak, peak - before);
  if (!kSanitized) {
    EXPECT_LT(peak - before, 40L * 1024) << "the server buffered replies nobody reads";
  }
  hog.reset();
  still_served();
}

// Per-connection bounds multiply with connections: 8 never-reading
// connections from each of three addresses held 16 MiB each (384 MiB in
// all). One budget now caps the sum (--max-memory) and each address's share
// of it; connections past it stop being read, and a client from another
// address is served throughout.
TEST_F(Bounds, ManyNeverReadingConnectionsStayWithinTheMemoryBudget) {
  const std::uint16_t metrics_port = free_port();
  start({"--max-memory", "96M", "--max-memory-per-address", "20M", "--metrics",
         "127.0.0.1:" + std::to_string(metrics_port)});
  const std::string data(1 << 20, 'b');
  nfs_fh3 fh = good_->create(root_, "big");
  good_->write(fh, 0, data);
  ASSERT_EQ(good_->read(fh, 0, 1 << 20), data);
  const long before = rss_kib(server_->pid());
  std::vector<Fd> hogs;
  for (const char* source : {"127.0.0.21", "127.0.0.22", "127.0.0.23"}) {
    for (int i = 0; i < 8; ++i) hogs.push_back(raw(source, 4096));
  }
  std::atomic<bool> flooding{true};
  std::vector<std::thread> floods;
  for (auto& hog : hogs) {
    floods.emplace_back([&, fd = hog.get()] {
      std::vector<std::uint8_t> args;
      xdr::encode(args, READ3args{fh, 0, 1 << 20});
      for (std::uint32_t i = 0; i < 64 && flooding; ++i) {
        if (!put(fd, record(make_call(0x9000 + i, kProgram, kVersion, 6, args)))) break;  // blocked: timed out
      }
    });
  }
  long peak = before;
  double held_peak = 0;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(good_->read(fh, 0, 1 << 20), data);  // served throughout
    peak = std::max(peak, rss_kib(server_->pid()));
    std::string m = scrape(metrics_port);
    held_peak = std::max(held_peak, metric(m, "nfsrdma_server_memory_bytes{kind=\"tcp_calls\"}") +
                                        metric(m, "nfsrdma_server_memory_bytes{kind=\"tcp_records\"}"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  flooding = false;
  const std::string m = scrape(metrics_port);
  for (auto& f : floods) f.join();
  std::printf("24 never-reading connections from 3 addresses: server RSS %ld KiB before, peak %ld KiB (+%ld KiB); "
              "TCP held at most %.1f MiB of a 96 MiB budget, 20 MiB per address\n",
              before, peak, peak - before, held_peak / (1 << 20));
  EXPECT_GT(metric(m, "nfsrdma_server_memory_refused_total{kind=\"tcp_calls\"}"), 0) << "no back-pressure seen";
  EXPECT_EQ(metric(m, "nfsrdma_server_memory_limit_bytes"), 96.0 * (1 << 20));
  EXPECT_LE(held_peak, 3 * 20.0 * (1 << 20) + 4 * (1 << 20)) << "past three addresses' shares (and the good client's)";
  if (!kSanitized) {
    EXPECT_LT(peak - before, 96L * 1024) << "the server grew past its budget";
  }
  hogs.clear();
  still_served();
}

TEST_F(Bounds, IdleConnectionsAreClosedBusyOnesKept) {
  start({"--idle-timeout", "1"});
  Fd idle = raw();
  Fd busy = raw();
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(answers(busy.get())) << "a connection in use was closed after " << i * 250 << " ms";
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(hung_up(idle.get())) << "an idle connection was kept past the idle timeout";
  Client again(*server_);  // the good client's connections idled out too; a client reconnects
  EXPECT_EQ(again.getattr(root_).type, NF3DIR);
}

TEST_F(Bounds, OneAddressCannotTakeEveryConnection) {
  start({"--max-connections-per-address", "4"});
  // The good client holds two (NFS and MOUNT); two more are allowed.
  Fd a = raw(), b = raw();
  EXPECT_TRUE(answers(a.get()));
  EXPECT_TRUE(answers(b.get()));
  for (int i = 0; i < 300; ++i) {
    Fd c = raw();
    ASSERT_TRUE(hung_up(c.get())) << "connection " << i + 5 << " from one address was served";
  }
  Fd other = raw("127.0.0.2");
  EXPECT_TRUE(answers(other.get())) << "another address was refused";
  // 300 refusals, logged at most once per 10 s.
  EXPECT_LE(log_lines_with("refusing connection from"), 2u);
  EXPECT_GE(log_lines_with("refusing connection from"), 1u);
  still_served();
}

TEST_F(Bounds, AtTheLimitTheLongestIdleConnectionMakesRoom) {
  start({"--max-connections", "4"});
  Fd oldest = raw();
  Fd newer = raw();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(answers(newer.get()));
  still_served();
  ASSERT_TRUE(good_->mnt(dir_.path()).ok());  // the good client's MOUNT connection, used too
  Fd newcomer = raw("127.0.0.3");
  EXPECT_TRUE(answers(newcomer.get())) << "a new client was refused while an idle connection was held";
  EXPECT_TRUE(hung_up(oldest.get())) << "the longest-idle connection was not the one closed";
  EXPECT_TRUE(answers(newer.get()));
  EXPECT_EQ(log_lines_with("evicting the longest-idle connection"), 1u);
}

// A 1 MiB WRITE as one-byte fragments (5 MiB on the wire) against the same
// bytes as five single-fragment WRITEs: server CPU for each, in this run.
// Re-reserving the record on every fragment made the first cost 7.6 s.
TEST_F(Bounds, AFragmentedRecordCostsASmallMultipleOfAWholeOne) {
  start();
  nfs_fh3 fh = good_->create(root_, "frag");
  std::vector<std::uint8_t> args;
  const std::string data(1 << 20, 'w');
  xdr::encode(args, WRITE3args{fh, 0, 1 << 20, stable_how::UNSTABLE,
                               {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}});
  const auto call = make_call(0x4242, kProgram, kVersion, 7, args);
  Fd fd = raw();
  double t0 = cpu_seconds(server_->pid());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(put(fd.get(), record(call)));
    ASSERT_EQ(reply_xid(fd.get()), 0x4242u);
  }
  const double whole = cpu_seconds(server_->pid()) - t0;
  std::vector<std::uint8_t> tiny;
  tiny.reserve(call.size() * 5);
  for (std::size_t i = 0; i < call.size(); ++i) {
    tiny.insert(tiny.end(), {static_cast<std::uint8_t>(i + 1 == call.size() ? 0x80 : 0), 0, 0, 1, call[i]});
  }
  t0 = cpu_seconds(server_->pid());
  ASSERT_TRUE(put(fd.get(), tiny));
  ASSERT_EQ(reply_xid(fd.get()), 0x4242u);
  const double fragmented = cpu_seconds(server_->pid()) - t0;
  std::printf("server CPU: 1 MiB WRITE in 1-byte fragments %.3f s; 5 single-fragment 1 MiB WRITEs %.3f s\n",
              fragmented, whole);
  if (!kSanitized) {
    EXPECT_LT(fragmented, 20 * whole + 0.2);
  }
  still_served();
}

// Every spelling of one export ("//", "/." runs) was its own MOUNT list entry,
// without a cap: 65,537 of them, then a DUMP, aborted the server in the
// encoder. Spellings are one entry now, and distinct directories are capped
// per host, oldest out.
TEST_F(Bounds, MountSpellingsAreOneEntryAndTheListIsCapped) {
  start();
  constexpr std::uint32_t kSpellings = 65'537;
  Fd fd = connect_raw("127.0.0.1", server_->mount_port(), {.timeout_s = 30});
  ASSERT_TRUE(fd.valid());
  const long before = rss_kib(server_->pid());
  std::thread writer([&] {
    for (std::uint32_t i = 0; i < kSpellings; ++i) {
      std::string path = dir_.path();
      for (std::uint32_t bit = 0; bit < 17; ++bit) path += (i >> bit) & 1 ? "/." : "/";
      std::vector<std::uint8_t> args;
      xdr::encode(args, mount3::DirPath{path});
      if (!put(fd.get(), record(make_call(0x10000 + i, mount3::kProgram, mount3::kVersion, 1, args)))) return;
    }
  });
  std::uint32_t answered = 0;
  while (answered < kSpellings && reply_xid(fd.get()) != 0) ++answered;
  writer.join();
  ASSERT_EQ(answered, kSpellings);
  auto dump = [&] {
    auto r = rpc::call_sync(good_->mount(), mount3::kProgram, mount3::kVersion, 2, {}, good_->auth(), 5000);
    EXPECT_TRUE(r.ok()) << "DUMP: " << (r.ok() ? "" : r.error().describe());
    mount3::MountList ml;
    if (r.ok()) {
      EXPECT_TRUE(xdr::decode(*r, ml).ok());
    }
    return ml;
  };
  mount3::MountList ml = dump();
  ASSERT_EQ(ml.entries.size(), 1u);
  EXPECT_EQ(ml.entries[0].ml_directory, dir_.path());
  const long after = rss_kib(server_->pid());
  std::printf("%u MNTs of one export, each spelled differently: server RSS %ld KiB before, %ld after\n", kSpellings,
              before, after);
  if (!kSanitized) {
    EXPECT_LT(after - before, 8L * 1024);
  }
  // 70 distinct directories: the first 6 make room for the last.
  for (int i = 0; i < 70; ++i) {
    good_->mkdir(root_, "d" + std::to_string(i));
    ASSERT_EQ(good_->mnt(dir_.path() + "/d" + std::to_string(i) + "/../d" + std::to_string(i))->status,
              mount3::MNT3_OK);
  }
  ml = dump();
  ASSERT_EQ(ml.entries.size(), 64u);
  EXPECT_EQ(ml.entries.front().ml_directory, dir_.path() + "/d6");
  EXPECT_EQ(ml.entries.back().ml_directory, dir_.path() + "/d69");
  // UMNT in another spelling removes it.
  std::vector<std::uint8_t> path;
  xdr::encode(path, mount3::DirPath{dir_.path() + "//d69/."});
  ASSERT_TRUE(rpc::call_sync(good_->mount(), mount3::kProgram, mount3::kVersion, 3, path, good_->auth(), 5000).ok());
  EXPECT_EQ(dump().entries.size(), 63u);
  still_served();
}

TEST_F(Bounds, TextFromAClientCannotForgeALogLine) {
  start();
  auto r = good_->mnt("/srv\n2026-11-23T00:00:00.000 info [1] mount: FORGED mounted /\x1b[2J");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->status, mount3::MNT3_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string log = server_->log();
  EXPECT_NE(log.find("/srv\\n2026-11-23T00:00:00.000 info [1] mount: FORGED mounted /\\x1b[2J"), std::string::npos);
  EXPECT_EQ(log.find("\n2026-11-23T00:00:00.000"), std::string::npos) << "a client's text began a log line";
}

}  // namespace
}  // namespace nfsrdma::test
