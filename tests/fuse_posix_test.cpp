// POSIX behaviour of the mount where NFS makes it easy to get wrong, each
// against what a local filesystem and the kernel NFS client do: truncate
// needs write permission even for the owner, truncation cuts data still
// waiting for COMMIT (across a server restart too), a directory read again
// from the start is read afresh, times NFSv3 cannot carry are refused, a
// write by another user clears setuid and setgid instead of failing, and an
// open file outlives its unlink or rename-over (silly rename).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <set>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

int err_of(int rc) { return rc == 0 ? 0 : errno; }

TEST_P(FuseMount, TruncateNeedsWritePermissionEvenForTheOwner) {
  ASSERT_EQ(::mkdir(m("pub").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(m("pub").c_str(), 01777), 0);
  EXPECT_EQ(as_user(1000, 1000, {}, [&] {
    for (const char* name : {"pub/ro", "pub/w-less", "pub/kept-open"}) {
      int fd = ::open(m(name).c_str(), O_CREAT | O_WRONLY, 0644);
      if (fd < 0 || ::write(fd, "twelve bytes", 12) != 12) return 100;
      ::close(fd);
    }
    int kept = ::open(m("pub/kept-open").c_str(), O_RDWR);
    if (kept < 0) return 101;
    if (::chmod(m("pub/ro").c_str(), 0444) != 0 || ::chmod(m("pub/w-less").c_str(), 0477) != 0 ||
        ::chmod(m("pub/kept-open").c_str(), 0444) != 0) {
      return 102;
    }
    // By name: refused, as on a local filesystem, though the owner may SETATTR.
    if (::truncate(m("pub/ro").c_str(), 0) == 0) return 1;
    if (errno != EACCES) return 2;
    // O_TRUNC asks for write permission whatever the access mode.
    int fd = ::open(m("pub/w-less").c_str(), O_RDONLY | O_TRUNC);
    if (fd >= 0) return 3;
    if (errno != EACCES) return 4;
    // A descriptor opened for writing before the chmod still truncates.
    if (::ftruncate(kept, 5) != 0) return 5;
    ::close(kept);
    return 0;
  }), 0);
  EXPECT_EQ(get(e("pub/ro")), "twelve bytes");
  EXPECT_EQ(get(e("pub/w-less")), "twelve bytes");
  EXPECT_EQ(get(e("pub/kept-open")), "twelv");
  // Root (not squashed here) may truncate anything, as locally.
  EXPECT_EQ(err_of(::truncate(m("pub/ro").c_str(), 3)), 0);
  EXPECT_EQ(get(e("pub/ro")), "twe");
}

TEST_P(FuseMount, TruncateCutsDataStillWaitingForCommit) {
  // More than a WRITE's worth: a file the write-behind holds whole in one
  // WRITE goes FILE_SYNC before a SETATTR (WriteBack::drain), leaving nothing
  // to commit.
  std::string data((1 << 20) + (256 << 10), 'x');
  int fd = ::open(m("t").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  // Not committed yet; the size is the truncated one at once, by name and by descriptor.
  ASSERT_EQ(::truncate(m("t").c_str(), 1000), 0);
  EXPECT_EQ(st(m("t")).st_size, 1000);
  ASSERT_EQ(::pwrite(fd, data.data(), 4096, 100000), 4096);
  ASSERT_EQ(::ftruncate(fd, 100), 0);
  struct stat s {};
  ASSERT_EQ(::fstat(fd, &s), 0);
  EXPECT_EQ(s.st_size, 100);
  // A restart before the COMMIT: the server's new verifier makes the client
  // send its uncommitted data again, which must not bring the cut bytes back.
  server_->kill_hard();
  server_->start();
  ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
  ::close(fd);
  EXPECT_EQ(st(e("t")).st_size, 100);
  EXPECT_EQ(st(m("t")).st_size, 100);
  EXPECT_EQ(get(e("t")), data.substr(0, 100));
  EXPECT_NE(mount_->log().find("write verifier changed"), std::string::npos);
}

std::set<std::string> names(DIR* d) {
  std::set<std::string> out;
  while (dirent* ent = ::readdir(d)) out.insert(ent->d_name);
  return out;
}

TEST_P(FuseMount, RewinddirReadsTheDirectoryAfresh) {
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  for (int i = 0; i < 10; ++i) put(m("d/f" + std::to_string(i)), "x");
  DIR* d = ::opendir(m("d").c_str());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(names(d).count("f3"), 1u);
  ASSERT_EQ(::unlink(m("d/f3").c_str()), 0);
  put(m("d/new"), "y");
  ::rewinddir(d);
  auto again = names(d);
  ::closedir(d);
  EXPECT_EQ(again.count("f3"), 0u) << "a removed name listed again after rewinddir";
  EXPECT_EQ(again.count("new"), 1u) << "a new name missing after rewinddir";
  EXPECT_EQ(again.size(), 12u);  // ".", ".." and ten files
}

TEST_P(FuseMount, TimesNfsv3CannotCarryAreClampedAsTheKernelClientDoes) {
  // The kernel's NFSv3 client gives the VFS the range the protocol carries
  // (0 to 2^32 - 1 seconds), and the VFS clamps a time outside it to the
  // nearest end, with no nanoseconds there.
  put(m("f"), "x");
  struct timespec fine[2] = {{0, UTIME_OMIT}, {4294967295, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, m("f").c_str(), fine, 0), 0);
  EXPECT_EQ(st(e("f")).st_mtim.tv_sec, 4294967295);
  struct Case { time_t asked; long nsec; time_t stored; };
  for (const Case& c : {Case{4294967296, 5, 4294967295}, Case{time_t{1} << 40, 0, 4294967295}, Case{-1, 5, 0},
                        Case{-100000, 0, 0}}) {
    struct timespec t[2] = {{c.asked, c.nsec}, {c.asked, c.nsec}};
    ASSERT_EQ(::utimensat(AT_FDCWD, m("f").c_str(), t, 0), 0) << c.asked << ": " << std::strerror(errno);
    EXPECT_EQ(st(e("f")).st_mtim.tv_sec, c.stored) << c.asked;
    EXPECT_EQ(st(e("f")).st_mtim.tv_nsec, 0) << c.asked;
    EXPECT_EQ(st(e("f")).st_atim.tv_sec, c.stored) << c.asked;
  }
}

TEST_P(FuseMount, WritingASetuidFileClearsTheBitsAndKeepsTheData) {
  put(m("suid"), "root's program");
  ASSERT_EQ(::chmod(m("suid").c_str(), 06777), 0);
  ASSERT_EQ(st(e("suid")).st_mode & 07777, 06777u);
  // Another user writes: the data lands and the setuid and setgid bits go,
  // as on a local filesystem and over the kernel's NFS client.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] {
    int fd = ::open(m("suid").c_str(), O_WRONLY | O_APPEND);
    if (fd < 0) return errno;
    int rc = ::write(fd, ", patched", 9) == 9 ? 0 : errno;
    if (::close(fd) != 0 && rc == 0) rc = errno;
    return rc;
  }), 0);
  EXPECT_EQ(get(e("suid")), "root's program, patched");
  EXPECT_EQ(st(e("suid")).st_mode & 07777, 0777u);
  EXPECT_EQ(st(m("suid")).st_mode & 07777, 0777u);
  // A chmod by someone other than the owner is still refused.
  ASSERT_EQ(::chmod(m("suid").c_str(), 06777), 0);
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return ::chmod(m("suid").c_str(), 0777) == 0 ? 0 : errno; }), EPERM);
  EXPECT_EQ(st(e("suid")).st_mode & 07777, 06777u);
}

// The export's hidden .nfs names, waiting up to 5 s for them to be `want`
// in number (the last close's RELEASE reaches the client after close returns).
std::vector<std::string> hidden_names(const std::string& dir, std::size_t want) {
  std::vector<std::string> out;
  for (int i = 0; i < 100; ++i) {
    out.clear();
    for (auto& ent : std::filesystem::directory_iterator(dir)) {
      if (ent.path().filename().string().rfind(".nfs", 0) == 0) out.push_back(ent.path().filename());
    }
    if (out.size() == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return out;
}

TEST_P(FuseMount, AnOpenFileOutlivesUnlinkAndRenameOverUntilItsLastClose) {
  put(m("doomed"), "still here");
  int fd = ::open(m("doomed").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::unlink(m("doomed").c_str()), 0);
  EXPECT_FALSE(std::filesystem::exists(m("doomed")));
  EXPECT_FALSE(std::filesystem::exists(e("doomed")));
  EXPECT_EQ(hidden_names(export_, 1).size(), 1u) << "no hidden name on the server";
  char buf[64] = {};
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 10) << std::strerror(errno);
  EXPECT_EQ(std::string(buf, 10), "still here");
  EXPECT_EQ(::pwrite(fd, " and more", 9, 10), 9) << std::strerror(errno);
  EXPECT_EQ(::fsync(fd), 0) << std::strerror(errno);
  struct stat s {};
  EXPECT_EQ(::fstat(fd, &s), 0) << std::strerror(errno);
  EXPECT_EQ(s.st_size, 19);
  ::close(fd);
  EXPECT_TRUE(hidden_names(export_, 0).empty()) << "the hidden name outlived the last close";

  // Renamed over while open: the reader keeps the old file, the name gets the new one.
  put(m("target"), "old contents");
  put(m("replacement"), "new");
  fd = ::open(m("target").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int fd2 = ::open(m("target").c_str(), O_RDONLY);  // two opens: hidden until both close
  ASSERT_GE(fd2, 0);
  ASSERT_EQ(::rename(m("replacement").c_str(), m("target").c_str()), 0);
  EXPECT_EQ(get(m("target")), "new");
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 12) << std::strerror(errno);
  EXPECT_EQ(std::string(buf, 12), "old contents");
  ::close(fd);
  EXPECT_EQ(hidden_names(export_, 1).size(), 1u) << "hidden name gone while a descriptor is open";
  EXPECT_EQ(::pread(fd2, buf, sizeof buf, 0), 12) << std::strerror(errno);
  ::close(fd2);
  EXPECT_TRUE(hidden_names(export_, 0).empty());

  // A file nobody has open is removed outright: nothing else is hidden.
  put(m("plain"), "x");
  ASSERT_EQ(::unlink(m("plain").c_str()), 0);
  EXPECT_TRUE(hidden_names(export_, 0).empty());
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseMount, ::testing::Values("rdma", "tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
