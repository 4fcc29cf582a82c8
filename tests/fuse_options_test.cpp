// nfs(5) mount options through a real mount: each one either does what nfs(5)
// says (sync and noac writes, locks, lookupcache, cto, rdirplus, bg, resvport,
// atime flags) or is refused with the reason; none is accepted and ignored;
// and what the lock options change in how a close reaches the daemon.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

using Options = FuseMount;

bool mounted(const std::string& path) {
  std::ifstream in("/proc/mounts");
  for (std::string line; std::getline(in, line);) {
    if (line.find(" " + path + " ") != std::string::npos) return true;
  }
  return false;
}

std::string mount_flags(const std::string& path) {
  std::ifstream in("/proc/mounts");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string src, dir, type, flags;
    f >> src >> dir >> type >> flags;
    if (dir == path) return "," + flags + ",";
  }
  return "";
}

// The client's count of calls to `proc`, from its metrics.
double calls(const std::string& metrics, const std::string& proc) {
  return metric(metrics, "nfsrdma_client_calls_total{proc=\"" + proc + "\"}");
}

TEST_P(Options, SyncAndNoacWritesAreOnTheServerWhenWriteReturns) {
  for (const char* opt : {"sync", "noac"}) {
    remount(opt);
    int fd = ::open(m(opt).c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    std::string data(100000, opt[0]);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(get(e(opt)), data) << opt << ": written, file still open, not yet on the server";
    ::close(fd);
  }
}

// This server is reached without a portmapper, so a network lock finds no
// lock manager: ENOLCK (fuse_lock_test takes network locks for real).
TEST_P(Options, LocksAreNetworkLocksUnlessKeptLocal) {
  put(e("f"), "x");
  auto try_locks = [&](int* posix, int* whole) {
    int fd = ::open(m("f").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    *posix = ::fcntl(fd, F_SETLK, &l) == 0 ? 0 : errno;
    *whole = ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    ::close(fd);
  };
  struct Case { const char* opts; int posix, whole; };
  for (const Case& c : {Case{"", ENOLCK, ENOLCK}, Case{"lock", ENOLCK, ENOLCK}, Case{"nolock", 0, 0},
                        Case{"local_lock=flock", ENOLCK, 0}, Case{"local_lock=posix", 0, ENOLCK},
                        Case{"local_lock=all", 0, 0}}) {
    remount(c.opts);
    int posix = -1, whole = -1;
    try_locks(&posix, &whole);
    EXPECT_EQ(posix, c.posix) << c.opts;
    EXPECT_EQ(whole, c.whole) << c.opts;
  }
  // Kept locally, a lock still excludes another process on this client.
  remount("nolock");
  int fd = ::open(m("f").c_str(), O_RDWR);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  int other = as_user(0, 0, {}, [&] {
    int fd2 = ::open(m("f").c_str(), O_RDWR);
    return ::flock(fd2, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
  });
  EXPECT_EQ(other, EWOULDBLOCK);
  ::close(fd);
}

// A read-only open's close sends the daemon no FLUSH where POSIX locks are
// kept on this client (the kernel releases them itself); where they are
// network locks the FLUSH is what releases them, so it goes.
TEST_P(Options, AReadOnlyCloseSendsNoFlushUnlessItReleasesNetworkLocks) {
  std::uint16_t port = free_port();
  put(e("f"), "data");
  auto requests = [&](const std::string& op) {
    return metric(scrape(port), "nfsrdma_fuse_requests_total{op=\"" + op + "\"}");
  };
  for (const char* opts : {"nolock", "local_lock=posix", "lock", "local_lock=flock"}) {
    remount(std::string(opts) + ",metrics=127.0.0.1:" + std::to_string(port));
    const double flushes = requests("flush"), opens = requests("open");
    for (int i = 0; i < 20; ++i) {
      int fd = ::open(m("f").c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      char buf[8];
      EXPECT_EQ(::read(fd, buf, sizeof buf), 4);
      ::close(fd);
    }
    const bool local = std::string(opts) == "nolock" || std::string(opts) == "local_lock=posix";
    EXPECT_EQ(requests("open") - opens, 20) << opts;
    EXPECT_EQ(requests("flush") - flushes, local ? 0 : 20) << opts;
    // A write open's close still flushes whatever the locks.
    int fd = ::open(m("f").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ::close(fd);
    EXPECT_EQ(requests("flush") - flushes, local ? 1 : 21) << opts;
  }
  // Kept here, a POSIX lock still goes when any descriptor of its process
  // for the file closes, a read-only one too (the kernel lets it go itself).
  remount("nolock");
  int rw = ::open(m("f").c_str(), O_RDWR);
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(rw, F_SETLK, &l), 0);
  auto other_locks = [&] {
    return as_user(0, 0, {}, [&] {
      int fd = ::open(m("f").c_str(), O_RDWR);
      struct flock w {};
      w.l_type = F_WRLCK;
      w.l_whence = SEEK_SET;
      return ::fcntl(fd, F_SETLK, &w) == 0 ? 0 : errno;
    });
  };
  EXPECT_EQ(other_locks(), EAGAIN);
  ::close(::open(m("f").c_str(), O_RDONLY));
  EXPECT_EQ(other_locks(), 0) << "closing a read-only descriptor kept the lock";
  ::close(rw);
}

TEST_P(Options, LookupcacheDecidesWhetherAMissingNameIsRemembered) {
  struct stat s {};
  for (const char* opts : {"lookupcache=all", "lookupcache=positive", "lookupcache=none"}) {
    remount(opts);
    std::string name = std::string("late-") + (opts + 12);
    ASSERT_NE(::stat(m(name).c_str(), &s), 0);
    put(e(name), "made on the server");
    bool seen = ::stat(m(name).c_str(), &s) == 0;
    EXPECT_EQ(seen, std::string(opts) != "lookupcache=all") << opts;
  }
  // none: a name gone on the server is gone here at once.
  remount("lookupcache=none");
  put(e("going"), "x");
  ASSERT_EQ(::stat(m("going").c_str(), &s), 0);
  std::filesystem::rename(e("going"), e("gone"));
  EXPECT_NE(::stat(m("going").c_str(), &s), 0);
}

TEST_P(Options, NoctoTrustsTheAttributeCacheAtOpen) {
  for (const char* opts : {"actimeo=60", "actimeo=60,nocto"}) {
    remount(opts);
    put(e("f"), "first");
    ASSERT_EQ(get(m("f")), "first");
    // Same size; a later mtime that close-to-open sees and nocto does not.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    put(e("f"), "again");
    bool cto = std::string(opts).find("nocto") == std::string::npos;
    EXPECT_EQ(get(m("f")), cto ? "again" : "first") << opts;
  }
}

TEST_P(Options, NordirplusListsWithReaddir) {
  std::uint16_t port = free_port();
  for (int i = 0; i < 5; ++i) put(e("f" + std::to_string(i)), "x");
  for (const char* opts : {"rdirplus", "nordirplus"}) {
    remount(std::string(opts) + ",metrics=127.0.0.1:" + std::to_string(port));
    std::size_t n = 0;
    for (auto& ent : std::filesystem::directory_iterator(mount_->path())) n += ent.is_regular_file();
    EXPECT_EQ(n, 5u);
    std::string metrics = scrape(port);
    bool plus = std::string(opts) == "rdirplus";
    EXPECT_EQ(calls(metrics, "READDIRPLUS") > 0, plus) << opts;
    EXPECT_EQ(calls(metrics, "READDIR") > 0, !plus) << opts;
  }
}

TEST_P(Options, AtimeAndOtherVfsFlagsReachTheMountPoint) {
  remount("noatime,nodiratime,noexec");
  std::string f = mount_flags(mount_->path());
  for (const char* want : {",noatime,", ",nodiratime,", ",noexec,"}) EXPECT_NE(f.find(want), std::string::npos) << f;
  remount("strictatime,suid");
  f = mount_flags(mount_->path());
  for (const char* gone : {",noatime,", ",relatime,", ",nosuid,"}) EXPECT_EQ(f.find(gone), std::string::npos) << f;
}

TEST_P(Options, BgReturnsAtOnceAndMountsWhenTheServerComesUp) {
  TempDir where;
  server_->stop();
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  int status = run_mount_command({"127.0.0.1:" + export_, where.path(), "-o",
                                  mount_options(*server_, GetParam(), "bg,retry=1")}, &out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("retrying in the background"), std::string::npos) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(mounted(where.path()));
  server_->start();
  for (int i = 0; i < 200 && !mounted(where.path()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(mounted(where.path())) << "the background mount never came up";
  put(e("after"), "x");
  EXPECT_TRUE(std::filesystem::exists(where.path() + "/after"));
  EXPECT_EQ(::umount2(where.path().c_str(), MNT_DETACH), 0);
}

TEST_P(Options, FgRetriesUntilTheServerComesUp) {
  server_->stop();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    server_->start();
  });
  remount("fg,retry=1");  // MountProcess waits for the mount
  later.join();
  put(e("f"), "x");
  EXPECT_EQ(get(m("f")), "x");
}

// A child that does `what` and exits 0; SIGKILL must end it within a second
// even while the server is gone (hard mount).
pid_t spawn(const std::function<void()>& what) {
  pid_t pid = ::fork();
  if (pid == 0) {
    what();
    ::_exit(0);
  }
  return pid;
}

// How long a SIGKILLed child took to go; 10 s if it did not.
std::chrono::milliseconds kill_and_time(pid_t pid) {
  auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::chrono::seconds(10);
}

TEST_P(Options, AProcessWaitingOnADeadServerCanBeKilled) {
  remount("hard");
  std::string data(1 << 20, 'r');
  put(e("old"), data);
  int rd = ::open(m("old").c_str(), O_RDONLY);
  int wr = ::open(m("new").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(rd, 0);
  ASSERT_GE(wr, 0);
  server_->stop();
  std::vector<std::pair<std::string, pid_t>> waiting = {
      {"stat", spawn([&] {
         struct stat s {};
         ::stat(m("missing").c_str(), &s);
       })},
      {"read", spawn([&] {
         char buf[4096];
         [[maybe_unused]] auto n = ::pread(rd, buf, sizeof buf, 512 << 10);
       })},
      {"write+fsync", spawn([&] {
         [[maybe_unused]] auto n = ::pwrite(wr, "w", 1, 0);
         ::fsync(wr);
       })},
  };
  // Killed while not waiting at all: its exit's close flushes what it wrote,
  // a wait that comes with no interrupt (the signal was taken).
  pid_t idle = spawn([&] {
    [[maybe_unused]] auto n = ::pwrite(wr, "i", 1, 1);
    ::pause();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // each is waiting on the server now
  for (auto& [what, pid] : waiting) {
    // In D state, not done: the kill below is what ends it.
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << what << " did not wait for the server";
    auto took = kill_and_time(pid);
    EXPECT_LT(took, std::chrono::seconds(1)) << what << " took " << took.count() << " ms to die";
  }
  auto took = kill_and_time(idle);
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "an idle writer took " << took.count() << " ms to die";
  server_->start();
  EXPECT_EQ(get(m("old")), data) << "the mount works again";
  EXPECT_EQ(::pwrite(wr, "x", 1, 2), 1);
  EXPECT_EQ(::fsync(wr), 0);
  ::close(wr);
  ::close(rd);
  EXPECT_EQ(get(e("new")), "wix") << "what the killed processes wrote went out when the server came back";
  EXPECT_NE(mount_->log().find("was killed while waiting"), std::string::npos) << mount_->log();
}

// A write the server never took is reported by the next flush or fsync of
// each open of the file. When the process waiting for it was killed
// (answered EINTR first), its open was told nothing: the parent, which
// shares that open (fork), is told at its fsync.
TEST_P(Options, AWriteErrorWhoseWaiterWasKilledIsReportedToTheNextFsync) {
  remount("soft,timeo=5,retrans=1");
  // A soft mount with 0.5 s timeouts may give a call up on a loaded machine
  // (a suite beside it): the test needs the open, not its first try.
  int wr = -1;
  for (int i = 0; i < 5 && wr < 0; ++i) wr = ::open(m("lost").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(wr, 0) << std::strerror(errno);
  server_->stop();
  pid_t writer = spawn([&] {
    [[maybe_unused]] auto n = ::pwrite(wr, "w", 1, 0);
    ::fsync(wr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its fsync waits on the server
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, WNOHANG), 0) << "the fsync did not wait for the server";
  kill_and_time(writer);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the soft mount gives the WRITE up
  server_->start();
  errno = 0;
  EXPECT_EQ(::fsync(wr), -1) << "the lost write was not reported";
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::fsync(wr), 0) << "reported once";
  ::close(wr);
}

// A lost write is reported through every open file description that was
// open when it was lost, once each, as the kernel's errseq_t does; one
// opened after it is not told of it.
TEST_P(Options, AWriteErrorIsReportedOnceThroughEachOpenOfTheFile) {
  remount("soft,timeo=5,retrans=1");
  int a = ::open(m("shared").c_str(), O_CREAT | O_WRONLY, 0644);
  int b = ::open(m("shared").c_str(), O_WRONLY);
  int r = ::open(m("shared").c_str(), O_RDONLY);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_GE(r, 0);
  server_->stop();
  ASSERT_EQ(::pwrite(a, "a", 1, 0), 1);
  errno = 0;
  EXPECT_EQ(::fsync(a), -1) << "the write the server never took";
  EXPECT_EQ(errno, EIO);
  server_->start();
  EXPECT_EQ(::close(r), 0) << "a descriptor not open for writing reports no write error at close";
  errno = 0;
  EXPECT_EQ(::fsync(b), -1) << "another open of the file was not told";
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::fsync(b), 0) << "told once";
  EXPECT_EQ(::fsync(a), 0) << "told once";
  int c = ::open(m("shared").c_str(), O_WRONLY);
  ASSERT_GE(c, 0);
  EXPECT_EQ(::pwrite(c, "c", 1, 0), 1) << "an open after the error is not told of it";
  EXPECT_EQ(::fsync(c), 0);
  ::close(a);
  ::close(b);
  ::close(c);
}

// An error nobody was told of (the write-behind sent the data on its own
// and the soft mount gave up) is told to the next open too, as well as to
// the open that wrote it.
TEST_P(Options, AWriteErrorNobodyWasToldOfIsToldToAnOpenMadeAfterIt) {
  remount("soft,timeo=5,retrans=1");
  int d = ::open(m("unseen").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(d, 0);
  server_->stop();
  ASSERT_EQ(::pwrite(d, "d", 1, 0), 1);
  std::this_thread::sleep_for(std::chrono::seconds(5));  // sent after a second of quiet, given up
  server_->start();
  int e = ::open(m("unseen").c_str(), O_WRONLY);
  ASSERT_GE(e, 0);
  errno = 0;
  EXPECT_EQ(::fsync(e), -1) << "an open after an error nobody was told of";
  EXPECT_EQ(errno, EIO);
  errno = 0;
  EXPECT_EQ(::fsync(d), -1) << "the open that wrote it";
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::fsync(d), 0);
  ::close(d);
  ::close(e);
}

// A server that stops answering but keeps its connections (stopped, or a
// network that drops everything): a killed reader gets its answer at once,
// and over RDMA only once the connection its buffer was offered on is shut,
// so the server's late RDMA Write cannot land in a buffer read next.
TEST_P(Options, AReaderKilledWhileTheServerIsStuckGetsItsAnswer) {
  remount("hard");
  std::string data(1 << 20, 's');
  put(e("stuck"), data);
  // O_DIRECT: the READ goes out in the reader's own request, with no page
  // cache (and no attribute check) before it.
  int rd = ::open(m("stuck").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(rd, 0);
  {
    // A first read takes the attribute check an open leaves due.
    void* first = nullptr;
    ASSERT_EQ(::posix_memalign(&first, 4096, 4096), 0);
    EXPECT_EQ(::pread(rd, first, 4096, 0), 4096);
    std::free(first);
  }
  auto paused = server_->pause();
  ASSERT_TRUE(paused);
  pid_t reader = spawn([&] {
    void* buf = nullptr;
    if (::posix_memalign(&buf, 4096, 65536) == 0) [[maybe_unused]] auto n = ::pread(rd, buf, 65536, 512 << 10);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int status = 0;
  EXPECT_EQ(::waitpid(reader, &status, WNOHANG), 0) << "the read did not wait for the server";
  auto took = kill_and_time(reader);
  // No interrupt comes for an O_DIRECT READ (sent in the background): its
  // caller is found within a second or two by the age of its call.
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the reader took " << took.count() << " ms to die";
  paused.resume();
  ::close(rd);
  EXPECT_EQ(get(m("stuck")), data) << "the mount works again, with the right data";
  if (GetParam() == "rdma") {
    EXPECT_NE(mount_->log().find("a cancelled call's buffer is still open to the server"), std::string::npos)
        << mount_->log();
  }
}

// A writer killed with its file open while the server is down: its exit's
// close cannot wait for the server, so an unmount meanwhile must not drop
// what it wrote. The daemon waits for the server, as a hard mount does.
TEST_P(Options, WhatAKilledWriterLeftGoesOutAtTheUnmount) {
  remount("hard");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t lone = spawn([&] {
    int fd = ::open(m("lone").c_str(), O_CREAT | O_WRONLY, 0644);
    [[maybe_unused]] auto n = ::write(fd, "L", 1);
    n = ::write(ready[1], "r", 1);
    ::pause();
  });
  char r;
  ASSERT_EQ(::read(ready[0], &r, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  server_->stop();
  auto took = kill_and_time(lone);
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the writer took " << took.count() << " ms to die";
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    server_->start();
  });
  mount_->unmount();  // the daemon waits for the server to take the data, then exits
  later.join();
  EXPECT_EQ(get(e("lone")), "L");
  // The unmount's commit took it, unless the session loop ended only after
  // the server was back (a loaded machine): then the writer's flush went out
  // on the reconnection first, and nothing was left to commit.
  const std::string log = mount_->log();
  if (log.find("unmounting ") < log.find("nfs: reconnected")) {
    EXPECT_NE(log.find("committed what 1 file(s) held at the unmount"), std::string::npos) << log;
  }
}

// SIGTERM and SIGINT to the daemon unmount, send what the write-behind
// held, and exit 0 (libinfinipath, loaded with libfabric, had them call
// exit(1) at once: the data was lost and the mount left dead).
TEST_P(Options, SigtermAndSigintUnmountAndSendWhatTheWriteBehindHeld) {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string name = std::string("held-") + strsignal(sig);
    const std::string data(256 << 10, static_cast<char>('a' + sig));
    int fd = ::open(m(name).c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(mount_->terminate(sig), 0) << strsignal(sig) << "\n" << mount_->log();
    EXPECT_FALSE(mount_->mounted()) << "the mount was left behind on " << strsignal(sig);
    ::close(fd);
    const std::string got = get(e(name));
    EXPECT_TRUE(got == data) << "what the write-behind held was lost on " << strsignal(sig) << ": the server has "
                             << got.size() << " of its " << data.size() << " bytes";
    mount_->unmount();
    mount_->start();
  }
}

// Data the write-behind held that the server never took makes the exit
// status 1 (a soft mount gives it up), with the reason in the log.
TEST_P(Options, ASigtermWhoseHeldDataCannotReachTheServerExitsWithOne) {
  remount("soft,timeo=5,retrans=1");
  int fd = ::open(m("unsent").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  server_->stop();
  ASSERT_EQ(::write(fd, "u", 1), 1);
  EXPECT_EQ(mount_->terminate(SIGTERM), 1) << mount_->log();
  EXPECT_NE(mount_->log().find("was not committed"), std::string::npos) << mount_->log();
  ::close(fd);
  server_->start();
}

// Calls still waiting on a stopped server when SIGTERM comes are answered
// before the FUSE session and the daemon's state go, and it exits cleanly.
TEST_P(Options, SigtermWithCallsWaitingOnAStoppedServerExitsCleanly) {
  const std::string data(1 << 20, 'w');
  put(e("waiting"), data);
  int rd = ::open(m("waiting").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(rd, 0);
  auto paused = server_->pause();
  ASSERT_TRUE(paused);
  std::vector<pid_t> readers;
  for (int i = 0; i < 3; ++i) {
    readers.push_back(spawn([&, i] {
      void* buf = nullptr;
      if (::posix_memalign(&buf, 4096, 65536) == 0) [[maybe_unused]] auto n = ::pread(rd, buf, 65536, i << 16);
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // their READs wait on the server
  EXPECT_EQ(mount_->terminate(SIGTERM), 0) << mount_->log();
  EXPECT_EQ(mount_->log().find("writing device"), std::string::npos) << "answers after the device closed are errors\n"
                                                                     << mount_->log();
  for (pid_t r : readers) {
    int status = 0;
    EXPECT_EQ(::waitpid(r, &status, 0), r);
  }
  ::close(rd);
  paused.resume();
}

TEST_P(Options, ResvportDecidesWhetherASecureExportLetsUsIn) {
  server_ = std::make_unique<ServerProcess>(std::vector<std::string>{export_ + " 127.0.0.1(rw,no_root_squash,secure)"});
  remount("resvport");
  put(e("f"), "x");
  EXPECT_EQ(get(m("f")), "x");
  mount_.reset();
  TempDir where;
  std::string out;
  int status = run_mount_command({"127.0.0.1:" + export_, where.path(), "-o",
                                  mount_options(*server_, GetParam(), "noresvport,retry=0")}, &out);
  EXPECT_EQ(status, 32) << out;
  // The reason, and the way out.
  EXPECT_NE(out.find("the export is 'secure'"), std::string::npos) << out;
  EXPECT_NE(out.find("(noresvport): add 'insecure' to the export's options, or mount as root"), std::string::npos)
      << out;
}

TEST_P(Options, OptionsThatCannotBeHonouredAreRefusedWithTheReason) {
  TempDir where;
  struct Case { const char* opt; const char* says; };
  for (const Case& c : {Case{"vers=4", "only NFS version 3"}, Case{"nfsvers=4.1", "only NFS version 3"},
                        Case{"sec=krb5", "no Kerberos"}, Case{"udp", "UDP is not supported"},
                        Case{"mountproto=udp", "TCP only"}, Case{"local_lock=some", "none, flock, posix or all"}}) {
    std::string out;
    int status = run_mount_command({"127.0.0.1:" + export_, where.path(), "-o",
                                    mount_options(*server_, GetParam(), c.opt)}, &out);
    EXPECT_EQ(status, 32) << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << out;
    EXPECT_FALSE(mounted(where.path()));
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Options, ::testing::Values("rdma", "tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
