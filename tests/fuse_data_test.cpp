// nfsrdma-fuse against nfsrdma-server: file data through a real mount (big
// copies, concurrent writers, a hard mount riding out a server restart, a
// soft mount failing in time) and mount errors before anything is mounted.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

std::vector<char> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<char> v(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t x = rng();
    std::memcpy(&v[i], &x, 8);
  }
  return v;
}

// Writes `data` in `chunk`-sized write(2)s, as cp does; returns 0 or errno.
int write_file(const std::string& path, const std::vector<char>& data, std::size_t chunk = 128 << 10) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return errno;
  for (std::size_t off = 0; off < data.size();) {
    ssize_t n = ::write(fd, data.data() + off, std::min(chunk, data.size() - off));
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return e;
    }
    off += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}

bool same_as(const std::string& path, const std::vector<char>& data) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  std::vector<char> buf(1 << 20);
  std::size_t off = 0;
  bool same = true;
  for (ssize_t n; same && (n = ::read(fd, buf.data(), buf.size())) > 0; off += static_cast<std::size_t>(n)) {
    same = off + static_cast<std::size_t>(n) <= data.size() && std::memcmp(buf.data(), &data[off], n) == 0;
  }
  ::close(fd);
  return same && off == data.size();
}

TEST_P(FuseMount, Copies256MiBInAndOutByteIdentical) {
  auto data = pattern(256 << 20, 1);
  ASSERT_EQ(write_file(m("big"), data), 0);
  EXPECT_TRUE(same_as(e("big"), data)) << "the server's copy differs";
  EXPECT_TRUE(same_as(m("big"), data)) << "reading back through the mount differs";
  // Rewriting in the middle, unaligned, lands exactly.
  int fd = ::open(m("big").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "patch", 5, 12345677), 5);
  ASSERT_EQ(::close(fd), 0);
  std::memcpy(&data[12345677], "patch", 5);
  EXPECT_TRUE(same_as(e("big"), data));
}

TEST_P(FuseMount, EightProcessesWriteAndReadAtOnce) {
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto data = pattern(16 << 20, 100 + static_cast<std::uint64_t>(i));
      std::string path = m("proc-" + std::to_string(i));
      if (write_file(path, data, 64 << 10) != 0) ::_exit(1);
      ::_exit(same_as(path, data) ? 0 : 2);
    }
    kids.push_back(pid);
  }
  for (int i = 0; i < 8; ++i) {
    int st = 0;
    ::waitpid(kids[i], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "writer " << i << " status " << st;
    EXPECT_TRUE(same_as(e("proc-" + std::to_string(i)), pattern(16 << 20, 100 + static_cast<std::uint64_t>(i))));
  }
}

// Many small scattered writes at once, more than the write-behind buffers
// hold: commits must free buffers while writers keep coming, and every block
// must land (a stall here once left writers waiting on an empty pool).
TEST_P(FuseMount, ConcurrentScatteredSmallWritesAllLand) {
  constexpr int kThreads = 16, kBlocksEach = 1024;
  constexpr std::size_t kBlock = 4096;
  int fd = ::open(m("scattered").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  ASSERT_GE(fd, 0);
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      void* buf = nullptr;
      if (::posix_memalign(&buf, kBlock, kBlock) != 0) return (void)++failures;
      std::mt19937 rng(t);
      std::vector<int> order(kBlocksEach);
      for (int i = 0; i < kBlocksEach; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order) {
        long block = static_cast<long>(i) * kThreads + t;  // each thread owns its blocks
        std::memset(buf, static_cast<int>(block % 251), kBlock);
        std::memcpy(buf, &block, sizeof block);
        if (::pwrite(fd, buf, kBlock, block * static_cast<off_t>(kBlock)) != static_cast<ssize_t>(kBlock)) ++failures;
      }
      ::free(buf);
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(failures, 0);
  std::vector<char> want(kBlock * kThreads * kBlocksEach);
  for (long block = 0; block < kThreads * kBlocksEach; ++block) {
    char* p = &want[static_cast<std::size_t>(block) * kBlock];
    std::memset(p, static_cast<int>(block % 251), kBlock);
    std::memcpy(p, &block, sizeof block);
  }
  EXPECT_TRUE(same_as(e("scattered"), want));
  EXPECT_TRUE(same_as(m("scattered"), want));
}

TEST_P(FuseMount, HardMountRidesOutAServerRestartDuringA512MiBCopy) {
  auto data = pattern(512 << 20, 7);
  int result = -1;
  std::thread writer([&] { result = write_file(m("through-restart"), data, 1 << 20); });
  // Kill the server once the copy is well under way, and bring it back 2 s later.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::filesystem::exists(e("through-restart")) == false ||
         std::filesystem::file_size(e("through-restart")) < (96u << 20)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the copy did not get going";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server_->kill_hard();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  server_->start();
  writer.join();
  EXPECT_EQ(result, 0) << std::strerror(result);
  EXPECT_TRUE(same_as(e("through-restart"), data)) << "the file differs after the restart";
  EXPECT_NE(mount_->log().find("reconnected"), std::string::npos);
  // The restarted server has a new write verifier: uncommitted data was sent again.
  EXPECT_NE(mount_->log().find("write verifier changed"), std::string::npos);
}

TEST_P(FuseMount, SoftMountFailsWithEioInTime) {
  remount("soft,timeo=5,retrans=1,noac");
  put(m("f"), "x");
  server_->kill_hard();
  auto start = std::chrono::steady_clock::now();
  struct stat s {};
  EXPECT_EQ(::stat(m("f").c_str(), &s), -1);
  EXPECT_EQ(errno, EIO);
  // retrans × timeo = 1 s, plus one reconnect attempt's worth of slack.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  server_->start();
}

TEST_P(FuseMount, NconnectSpreadsCallsOverConnections) {
  remount("nconnect=4");
  auto data = pattern(32 << 20, 9);
  ASSERT_EQ(write_file(m("n"), data), 0);
  EXPECT_TRUE(same_as(m("n"), data));
  EXPECT_TRUE(same_as(e("n"), data));
}

TEST_P(FuseMount, MountErrorsAreOneLineAndNothingIsMounted) {
  TempDir where;
  std::filesystem::create_directory(dir_.path() + "/closed");
  struct Case { std::string source, options, says; };
  std::vector<Case> cases = {
      {"127.0.0.1:" + export_, "proto=" + GetParam() + ",retry=0,mountport=" + std::to_string(free_port()), "connect"},
      {"127.0.0.1:/not/exported", mount_options(*server_, GetParam()), "no such export"},
      {"127.0.0.1:" + export_, mount_options(*server_, GetParam(), "frobnicate"), "unknown mount option"},
  };
  if (GetParam() == "rdma") {
    cases.push_back({"127.0.0.1:" + export_, mount_options(*server_, "rdma") + ",provider=nosuch", "nosuch"});
  }
  for (const auto& c : cases) {
    std::string out;
    int status = run_mount_command({c.source, where.path(), "-o", c.options}, &out);
    EXPECT_EQ(status, 32) << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_TRUE(std::filesystem::is_empty(where.path()));
  }
}

// Small files cost the calls the kernel client makes for them: a create,
// write and close is CREATE, SETATTR (the mode, after an exclusive create),
// one FILE_SYNC WRITE and no COMMIT; opening and reading one is ACCESS and
// READ; a rename or a remove is that call alone. The GETATTR the kernel asks
// after each change (FUSE drops its copy of the attributes) is answered from
// what the change's reply brought. (The LOOKUP of a new name is FUSE's: it
// asks before every create.)
// WRITEs out together answer in any order: the size a stat reports after
// them is the file's, not what an earlier WRITE's late reply said.
TEST_P(FuseMount, SizeAfterWritesOutTogetherIsTheFiles) {
  const std::string block(1 << 20, 'y');
  for (int f = 0; f < 5; ++f) {
    const std::string name = "together" + std::to_string(f);
    int fd = ::open(m(name).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(::write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    ASSERT_EQ(::fsync(fd), 0);
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 8 << 20);
    ASSERT_EQ(::close(fd), 0);
    EXPECT_EQ(::stat(m(name).c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 8 << 20);
  }
}

// A listing is read from the server in batches larger than the kernel's
// reads of it take: one read before a file open here was written must not
// give the kernel that file's old size afterwards (it would cut the size an
// open descriptor sees, and where O_APPEND writes).
TEST_P(FuseMount, AListingReadBeforeAWriteLeavesTheWrittenSize) {
  ASSERT_EQ(::mkdir(m("many").c_str(), 0755), 0);
  for (int i = 0; i < 50; ++i) put(m("many/f" + std::to_string(i)), "");
  int fd = ::open(m("many/f7").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  int dir = ::open(m("many").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  // A small buffer: the kernel reads the whole batch, keeps a few names and
  // asks again for the rest, which the daemon answers from that batch.
  char buf[256];
  ASSERT_GT(::syscall(SYS_getdents64, dir, buf, sizeof buf), 0);
  ASSERT_EQ(::write(fd, "0123456789", 10), 10);
  ASSERT_EQ(::fsync(fd), 0);  // on the server: no data on its way makes the size up
  put(m("many/f8"), "abc");      // written and closed meanwhile
  while (::syscall(SYS_getdents64, dir, buf, sizeof buf) > 0) {
  }
  ::close(dir);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 10);
  ASSERT_EQ(::write(fd, "abcdefghij", 10), 10);
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(get(e("many/f7")), "0123456789abcdefghij");
  fd = ::open(m("many/f8").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "def", 3), 3);
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(get(e("many/f8")), "abcdef");
}

TEST_P(FuseMount, SmallFilesCostTheCallsTheKernelClientMakes) {
  const std::uint16_t port = free_port();
  remount("metrics=127.0.0.1:" + std::to_string(port));
  ASSERT_EQ(::mkdir(m("small").c_str(), 0755), 0);
  const std::vector<const char*> procs = {"LOOKUP", "CREATE", "SETATTR", "WRITE", "COMMIT", "GETATTR",
                                          "ACCESS", "READ", "RENAME", "REMOVE"};
  std::map<std::string, double> before;
  auto delta = [&] {
    std::string s = scrape(port);
    std::map<std::string, double> d;
    for (const char* p : procs) {
      double v = metric(s, std::string("nfsrdma_client_calls_total{proc=\"") + p + "\"}");
      d[p] = v - before[p];
      before[p] = v;
    }
    return d;
  };
  delta();
  constexpr int kFiles = 40;
  const std::string data(100, 'x');
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(m("small/f" + std::to_string(i)).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), 100);
    ASSERT_EQ(::close(fd), 0);
  }
  auto made = delta();
  EXPECT_EQ(made["CREATE"], kFiles);
  EXPECT_EQ(made["SETATTR"], kFiles);
  EXPECT_EQ(made["WRITE"], kFiles);
  EXPECT_EQ(made["COMMIT"], 0) << "a file that fits one WRITE is written FILE_SYNC, with no COMMIT";
  EXPECT_EQ(made["LOOKUP"], 0) << "FUSE's lookup before each create, answered from the directory we made";
  EXPECT_LE(made["GETATTR"], 2);
  // A stat after the close is answered from the WRITE's reply, as the kernel
  // client answers it from its attribute cache, and says what the server has.
  for (int i = 0; i < kFiles; ++i) {
    struct stat st {}, direct {};
    ASSERT_EQ(::stat(m("small/f" + std::to_string(i)).c_str(), &st), 0);
    ASSERT_EQ(::stat(e("small/f" + std::to_string(i)).c_str(), &direct), 0);
    EXPECT_EQ(st.st_size, 100);
    EXPECT_EQ(st.st_mtim.tv_sec, direct.st_mtim.tv_sec);
    EXPECT_EQ(st.st_mtim.tv_nsec, direct.st_mtim.tv_nsec);
  }
  EXPECT_LE(delta()["GETATTR"], 2) << "stat after a small file's close";
  const double fuse_getattrs = metric(scrape(port), "nfsrdma_fuse_requests_total{op=\"getattr\"}");
  for (int i = 0; i < kFiles; ++i) {
    char buf[200];
    int fd = ::open(m("small/f" + std::to_string(i)).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::read(fd, buf, sizeof buf), 100);
    ::close(fd);
  }
  auto read = delta();
  EXPECT_EQ(read["ACCESS"], kFiles);
  EXPECT_EQ(read["READ"], kFiles);
  EXPECT_LE(read["GETATTR"], 2) << "the open's ACCESS brought the attributes";
  EXPECT_LE(metric(scrape(port), "nfsrdma_fuse_requests_total{op=\"getattr\"}") - fuse_getattrs, 2)
      << "an open of a file changed only by us leaves the kernel its attributes";
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_EQ(::rename(m("small/f" + std::to_string(i)).c_str(), m("small/g" + std::to_string(i)).c_str()), 0);
  }
  for (int i = 0; i < kFiles; ++i) ASSERT_EQ(::unlink(m("small/g" + std::to_string(i)).c_str()), 0);
  auto gone = delta();
  EXPECT_EQ(gone["RENAME"], kFiles);
  EXPECT_EQ(gone["LOOKUP"], 0) << "the rename targets' lookups, answered the same way";
  EXPECT_EQ(gone["REMOVE"], kFiles);
  EXPECT_LE(gone["GETATTR"], 2);
  // What the cache answered is what the server has.
  struct stat st {};
  ASSERT_EQ(::stat(m("small").c_str(), &st), 0);
  struct stat direct {};
  ASSERT_EQ(::stat(e("small").c_str(), &direct), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, direct.st_mtim.tv_sec);
  EXPECT_EQ(st.st_mtim.tv_nsec, direct.st_mtim.tv_nsec);
  EXPECT_EQ(st.st_nlink, direct.st_nlink);
}

// tar -x as root: directories made 0700 while they fill, each file made
// O_EXCL, written, given its times, owner and mode, closed. The kernel client
// sends CREATE, a SETATTR for each of those four (the first the exclusive
// create's mode) and one FILE_SYNC WRITE, flushed before the first SETATTR;
// no LOOKUP once the server let root search the directory (its cached ACCESS
// answer), no COMMIT.
TEST_P(FuseMount, ExtractingATreeAsRootCostsTheCallsTheKernelClientMakes) {
  const std::uint16_t port = free_port();
  remount("metrics=127.0.0.1:" + std::to_string(port));
  std::map<std::string, double> before;
  auto delta = [&] {
    std::string s = scrape(port);
    std::map<std::string, double> d;
    for (const char* p : {"LOOKUP", "CREATE", "SETATTR", "WRITE", "COMMIT", "GETATTR"}) {
      double v = metric(s, std::string("nfsrdma_client_calls_total{proc=\"") + p + "\"}");
      d[p] = v - before[p];
      before[p] = v;
    }
    return d;
  };
  ASSERT_EQ(::mkdir(m("x").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(m("x/sub").c_str(), 0700), 0);
  delta();
  constexpr int kFiles = 40;
  const std::string data(100, 'x');
  const timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 0}};
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(m("x/sub/f" + std::to_string(i)).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), 100);
    ASSERT_EQ(::futimens(fd, times), 0);
    ASSERT_EQ(::fchown(fd, 0, 0), 0);
    ASSERT_EQ(::fchmod(fd, 0644), 0);
    ASSERT_EQ(::close(fd), 0);
  }
  auto made = delta();
  EXPECT_EQ(made["CREATE"], kFiles);
  EXPECT_EQ(made["SETATTR"], 4 * kFiles);
  EXPECT_EQ(made["WRITE"], kFiles);
  EXPECT_EQ(made["COMMIT"], 0) << "the WRITE before the first SETATTR goes FILE_SYNC";
  EXPECT_LE(made["LOOKUP"], 2) << "names in 0700 directories, once root may search them";
  EXPECT_LE(made["GETATTR"], 2);
  for (int i = 0; i < kFiles; ++i) {
    struct stat direct {};
    ASSERT_EQ(::stat(e("x/sub/f" + std::to_string(i)).c_str(), &direct), 0);
    EXPECT_EQ(direct.st_size, 100);
    EXPECT_EQ(direct.st_mode & 07777, 0644u);
    EXPECT_EQ(direct.st_mtim.tv_sec, 1700000000);
  }
  // rsync -a makes a directory 0700 and opens it up at once: its names stay
  // cached and its listing answers the lookups before creates and renames.
  ASSERT_EQ(::mkdir(m("x/rs").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(m("x/rs").c_str(), 0755), 0);
  delta();
  for (int i = 0; i < kFiles; ++i) {
    const std::string tmp = m("x/rs/.f" + std::to_string(i) + ".tmp"), name = m("x/rs/f" + std::to_string(i));
    struct stat none {};
    ASSERT_NE(::stat(name.c_str(), &none), 0);
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), 100);
    ASSERT_EQ(::close(fd), 0);
    ASSERT_EQ(::rename(tmp.c_str(), name.c_str()), 0);
  }
  EXPECT_LE(delta()["LOOKUP"], 1) << "a directory opened to others keeps its listing (none per file)";
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseMount, ::testing::Values("rdma", "tcp"), transport_name);

// A server offering 4 MiB READs and WRITEs, mounted with rsize and wsize of
// 4 MiB: sequential writes go out as 4 MiB WRITEs (FUSE hands the daemon at
// most 1 MiB at a time; the write-behind gathers them) and read back whole.
class FourMiB : public FuseMount {
  std::vector<std::string> server_extra() const override { return {"--rtmax", "4194304", "--wtmax", "4194304"}; }
};

TEST_P(FourMiB, SequentialWritesGoOutAs4MiBWritesAndReadBack) {
  const std::uint16_t port = free_port();
  remount("rsize=4194304,wsize=4194304,metrics=127.0.0.1:" + std::to_string(port));
  auto data = pattern(64 << 20, 11);
  ASSERT_EQ(write_file(m("big"), data, 1 << 20), 0);
  EXPECT_TRUE(same_as(e("big"), data)) << "the server's copy differs";
  EXPECT_TRUE(same_as(m("big"), data)) << "reading back through the mount differs";
  const double writes = metric(scrape(port), "nfsrdma_client_calls_total{proc=\"WRITE\"}");
  EXPECT_GE(writes, 16);
  EXPECT_LE(writes, 24) << "64 MiB went out in more than 24 WRITEs: not gathered to 4 MiB";
}

INSTANTIATE_TEST_SUITE_P(Transports, FourMiB, ::testing::Values("rdma", "tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
