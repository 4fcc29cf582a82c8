// Network locks through nfsrdma-fuse (lock, the default) on nfsrdma-server's
// NLM: two mounts of one export are two lock clients, as two hosts would be.
// Conflicts, ranges, F_GETLK, flock, blocking and interrupted waits, close,
// a server restart (reclaim), a killed client (its successor's SM_NOTIFY),
// SQLite with two writers, and a server without NLM. Over rdma and tcp.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

using namespace std::chrono_literals;

int setlk(int fd, short type, off_t start, off_t len, int cmd = F_SETLK) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return ::fcntl(fd, cmd, &fl) == 0 ? 0 : errno;
}

struct flock getlk(int fd, short type, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  EXPECT_EQ(::fcntl(fd, F_GETLK, &fl), 0) << std::strerror(errno);
  return fl;
}

class FuseLocks : public FuseMount {
 protected:
  // Clients find NLM through the portmapper on port 111, which the server
  // serves itself here.
  std::vector<std::string> server_extra() const override { return {"--portmap", "--grace", "4"}; }
  void SetUp() override {
    try {
      FuseMount::SetUp();
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()).find("111") != std::string::npos) GTEST_SKIP() << "port 111 is taken: " << e.what();
      throw;
    }
    if (IsSkipped()) return;
    other_ = std::make_unique<MountProcess>("127.0.0.1:" + export_, mount_options(*server_, GetParam()));
    put(m("f"), "0123456789");
    fa_ = ::open(m("f").c_str(), O_RDWR);
    fb_ = ::open((*other_ / "f").c_str(), O_RDWR);
    ASSERT_GE(fa_, 0);
    ASSERT_GE(fb_, 0);
  }
  void TearDown() override {
    if (fa_ >= 0) ::close(fa_);
    if (fb_ >= 0) ::close(fb_);
    std::string log = other_ ? other_->log() : "";
    other_.reset();
    if (HasFailure()) std::cerr << "second mount's log:\n" << tail(log);
    FuseMount::TearDown();
  }
  // F_GETLK on the server's own copy, as a process there sees it.
  std::string on_server(off_t start, off_t len) {
    int fd = ::open(e("f").c_str(), O_RDWR);
    auto fl = getlk(fd, F_WRLCK, start, len);
    ::close(fd);
    if (fl.l_type == F_UNLCK) return "free";
    return std::string(fl.l_type == F_WRLCK ? "W " : "R ") + std::to_string(fl.l_start) + " " + std::to_string(fl.l_len);
  }

  std::unique_ptr<MountProcess> other_;
  int fa_ = -1, fb_ = -1;
};

// After a server or client restart.
class FuseLockRecovery : public FuseLocks {};

TEST_P(FuseLocks, ConflictsRangesAndGetlkAcrossClients) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 100), 0);
  EXPECT_EQ(setlk(fb_, F_RDLCK, 50, 10), EAGAIN);
  auto h = getlk(fb_, F_RDLCK, 50, 10);
  EXPECT_EQ(h.l_type, F_WRLCK);
  EXPECT_EQ(h.l_start, 0);
  EXPECT_EQ(h.l_len, 100);
  EXPECT_EQ(h.l_pid, ::getpid());
  EXPECT_EQ(on_server(0, 0), "W 0 100");
  EXPECT_EQ(setlk(fb_, F_RDLCK, 100, 10), 0);  // beside it
  // Split: the middle let go, the edges still held.
  ASSERT_EQ(setlk(fa_, F_UNLCK, 40, 20), 0);
  EXPECT_EQ(setlk(fb_, F_WRLCK, 40, 20), 0);
  EXPECT_EQ(setlk(fb_, F_WRLCK, 39, 1), EAGAIN);
  EXPECT_EQ(setlk(fb_, F_WRLCK, 60, 1), EAGAIN);
  ASSERT_EQ(setlk(fb_, F_UNLCK, 0, 0), 0);
  // Downgrade the middle to shared; merge back by upgrading it.
  ASSERT_EQ(setlk(fa_, F_RDLCK, 40, 20), 0);
  EXPECT_EQ(setlk(fb_, F_RDLCK, 45, 5), 0);
  EXPECT_EQ(setlk(fa_, F_WRLCK, 40, 20), EAGAIN);  // b reads there now
  ASSERT_EQ(setlk(fb_, F_UNLCK, 0, 0), 0);
  ASSERT_EQ(setlk(fa_, F_WRLCK, 40, 20), 0);
  EXPECT_EQ(on_server(0, 0), "W 0 100");  // one range again
}

TEST_P(FuseLocks, ProcessesOnTheServerAndFlock) {
  int local = ::open(e("f").c_str(), O_RDWR);
  ASSERT_EQ(setlk(local, F_WRLCK, 0, 1), 0);
  EXPECT_EQ(setlk(fa_, F_RDLCK, 0, 10), EAGAIN);
  ASSERT_EQ(setlk(local, F_UNLCK, 0, 0), 0);
  ::close(local);
  // flock(2): a whole-file lock, between the two clients.
  ASSERT_EQ(::flock(fa_, LOCK_EX), 0);
  EXPECT_NE(::flock(fb_, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  EXPECT_EQ(on_server(5, 1), "W 0 0");
  ASSERT_EQ(::flock(fa_, LOCK_UN), 0);
  EXPECT_EQ(::flock(fb_, LOCK_SH | LOCK_NB), 0);
}

TEST_P(FuseLocks, AWaiterIsGrantedWhenTheHolderLetsGo) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 0), 0);
  auto t0 = std::chrono::steady_clock::now();
  std::thread holder([&] {
    std::this_thread::sleep_for(500ms);
    setlk(fa_, F_UNLCK, 0, 0);
  });
  EXPECT_EQ(setlk(fb_, F_WRLCK, 0, 0, F_SETLKW), 0);
  holder.join();
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 450ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(setlk(fa_, F_RDLCK, 0, 1), EAGAIN);
}

TEST_P(FuseLocks, AnInterruptedWaiterLeavesNoLock) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 0), 0);
  pid_t child = ::fork();
  if (child == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};  // no SA_RESTART: the wait ends with EINTR
    ::sigaction(SIGALRM, &sa, nullptr);
    ::alarm(1);
    int fd = ::open((*other_ / "f").c_str(), O_RDWR);
    ::_exit(setlk(fd, F_WRLCK, 0, 0, F_SETLKW) == EINTR ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the waiter was not interrupted with EINTR";
  ASSERT_EQ(setlk(fa_, F_UNLCK, 0, 0), 0);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(on_server(0, 0), "free");
  EXPECT_EQ(setlk(fb_, F_WRLCK, 0, 0), 0);
}

TEST_P(FuseLocks, CloseLetsGoAndWritesUnderALockAreSeen) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 0), 0);
  ASSERT_EQ(::pwrite(fa_, "written under the lock", 22, 0), 22);
  ::close(fa_);  // lets go of the lock, its write committed first
  fa_ = -1;
  EXPECT_EQ(on_server(0, 0), "free");
  ASSERT_EQ(setlk(fb_, F_RDLCK, 0, 0), 0);
  char buf[32] = {};
  ASSERT_EQ(::pread(fb_, buf, 22, 0), 22);
  EXPECT_EQ(std::string(buf, 22), "written under the lock");
}

TEST_P(FuseLockRecovery, AServerRestartIsFollowedByReclaim) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 10), 0);
  server_->kill_hard();
  EXPECT_EQ(on_server(0, 0), "free");
  server_->start();
  // The client sees the new NSM state within 2 s and reclaims in the grace period.
  std::string seen;
  for (int i = 0; i < 40 && seen != "W 0 10"; ++i, std::this_thread::sleep_for(200ms)) seen = on_server(0, 0);
  EXPECT_EQ(seen, "W 0 10") << server_->log();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(setlk(fb_, F_WRLCK, 5, 1), EAGAIN);  // waits out the grace period, then is refused
  std::cerr << "a conflicting lock was answered after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  EXPECT_EQ(setlk(fb_, F_WRLCK, 10, 1), 0);
}

TEST_P(FuseLockRecovery, ALockThatCannotBeReclaimedFailsIo) {
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 10), 0);
  server_->kill_hard();
  // While the server is down a process there takes the range: the reclaim must fail.
  int local = ::open(e("f").c_str(), O_RDWR);
  ASSERT_EQ(setlk(local, F_WRLCK, 0, 10), 0);
  server_->start();
  char c = 0;
  bool failed = false;
  for (int i = 0; i < 50 && !failed; ++i, std::this_thread::sleep_for(200ms)) {
    failed = ::pread(fa_, &c, 1, 0) < 0 && errno == EIO;
  }
  EXPECT_TRUE(failed) << "reads went on without the lock";
  EXPECT_LT(::pwrite(fa_, "x", 1, 0), 0);
  EXPECT_NE(mount_->log().find("could not be reclaimed"), std::string::npos);
  ::close(local);
}

TEST_P(FuseLockRecovery, AKilledClientsSuccessorFreesItsLocks) {
  int fd = ::open(m("g").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(setlk(fa_, F_WRLCK, 0, 0), 0);
  ::close(fd);
  mount_->kill_hard();  // no close reaches the server: the lock stays there
  ::close(fa_);
  fa_ = -1;
  EXPECT_EQ(on_server(0, 0), "W 0 0");
  mount_->start();  // the same mount point: the same lock client
  int g = ::open(m("g").c_str(), O_RDWR);
  ASSERT_EQ(setlk(g, F_WRLCK, 0, 0), 0);  // its first lock tells the server it restarted
  EXPECT_EQ(on_server(0, 0), "free");
  EXPECT_EQ(setlk(fb_, F_WRLCK, 0, 0), 0);
  ::close(g);
}

// Two writers, one per client, each running transactions that read the row
// count and insert it: with working locks every count is seen once.
TEST_P(FuseLocks, SqliteWithTwoWritersOnTwoClients) {
  constexpr int kEach = 400;
  auto writer = [&](const std::string& path, const char* who) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return 1;
    sqlite3_busy_timeout(db, 60000);
    sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t (who TEXT, i INTEGER, seen INTEGER)", nullptr, nullptr, nullptr);
    for (int i = 0; i < kEach; ++i) {
      std::string sql = std::string("BEGIN IMMEDIATE; INSERT INTO t SELECT '") + who + "', " + std::to_string(i) +
                        ", count(*) FROM t; COMMIT;";
      if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
        std::fprintf(stderr, "%s: %s\n", who, sqlite3_errmsg(db));
        sqlite3_close(db);
        return 1;
      }
    }
    sqlite3_close(db);
    return 0;
  };
  sqlite3* init = nullptr;
  ASSERT_EQ(sqlite3_open(m("db").c_str(), &init), SQLITE_OK);
  sqlite3_exec(init, "CREATE TABLE t (who TEXT, i INTEGER, seen INTEGER)", nullptr, nullptr, nullptr);
  sqlite3_close(init);
  auto t0 = std::chrono::steady_clock::now();
  pid_t a = ::fork();
  if (a == 0) ::_exit(writer(m("db"), "a"));
  pid_t b = ::fork();
  if (b == 0) ::_exit(writer(*other_ / "db", "b"));
  int sa = 0, sb = 0;
  ::waitpid(a, &sa, 0);
  ::waitpid(b, &sb, 0);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
  std::cerr << "sqlite: " << 2 * kEach << " transactions on two clients in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(e("db").c_str(), &db), SQLITE_OK);
  auto one = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    std::string v = sqlite3_step(st) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0)) : "";
    sqlite3_finalize(st);
    return v;
  };
  EXPECT_EQ(one("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(one("SELECT count(*) FROM t"), std::to_string(2 * kEach));
  EXPECT_EQ(one("SELECT count(DISTINCT seen) FROM t"), std::to_string(2 * kEach));
  sqlite3_close(db);
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseLocks, ::testing::Values("rdma", "tcp"), transport_name);
// NLM and NSM go over TCP whatever carries NFS: recovery once, over tcp.
INSTANTIATE_TEST_SUITE_P(Transports, FuseLockRecovery, ::testing::Values("tcp"), transport_name);

// A server without NLM: ENOLCK, said once in the mount's log.
class FuseNoNlm : public FuseMount {
 protected:
  std::vector<std::string> server_extra() const override { return {"--no-nlm"}; }
};

TEST_P(FuseNoNlm, LocksFailWithEnolck) {
  put(m("f"), "x");
  int fd = ::open(m("f").c_str(), O_RDWR);
  EXPECT_EQ(setlk(fd, F_WRLCK, 0, 0), ENOLCK);
  EXPECT_EQ(setlk(fd, F_RDLCK, 0, 0), ENOLCK);
  EXPECT_EQ(setlk(fd, F_UNLCK, 0, 0), 0);
  ::close(fd);
  std::string log = mount_->log();
  auto first = log.find("no network lock manager");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("no network lock manager", first + 1), std::string::npos) << "said more than once";
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseNoNlm, ::testing::Values("tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
