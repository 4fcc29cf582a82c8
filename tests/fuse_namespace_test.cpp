// nfsrdma-fuse against nfsrdma-server: names and attributes through a real
// mount, checked with stat(2) right after each change (post-op attributes),
// and callers' identities reaching the server.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <dirent.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

TEST_P(FuseMount, TreeChangesShowInStatAtOnce) {
  ASSERT_EQ(::mkdir(m("d").c_str(), 0750), 0);
  EXPECT_EQ(st(m("d")).st_mode, S_IFDIR | 0750u);
  put(m("d/f"), "hello");
  EXPECT_EQ(st(m("d/f")).st_size, 5);
  EXPECT_EQ(get(e("d/f")), "hello");

  // LINK: both names show two links at once.
  ASSERT_EQ(::link(m("d/f").c_str(), m("d/g").c_str()), 0);
  EXPECT_EQ(st(m("d/f")).st_nlink, 2u);
  EXPECT_EQ(st(m("d/g")).st_ino, st(m("d/f")).st_ino);
  // RENAME over an existing target replaces it.
  put(m("d/h"), "old");
  ASSERT_EQ(::rename(m("d/g").c_str(), m("d/h").c_str()), 0);
  EXPECT_EQ(get(m("d/h")), "hello");
  EXPECT_NE(::access(m("d/g").c_str(), F_OK), 0);
  EXPECT_EQ(st(m("d/f")).st_nlink, 2u);
  // REMOVE: the other name is back to one link.
  ASSERT_EQ(::unlink(m("d/h").c_str()), 0);
  EXPECT_EQ(st(m("d/f")).st_nlink, 1u);

  // SETATTR: mode, owner, size, and ctime moves.
  struct stat before = st(m("d/f"));
  ::usleep(20000);
  ASSERT_EQ(::chmod(m("d/f").c_str(), 0604), 0);
  struct stat after = st(m("d/f"));
  EXPECT_EQ(after.st_mode & 07777, 0604u);
  EXPECT_GT(after.st_ctim.tv_sec * 1000000000L + after.st_ctim.tv_nsec,
            before.st_ctim.tv_sec * 1000000000L + before.st_ctim.tv_nsec);
  ASSERT_EQ(::chown(m("d/f").c_str(), 1234, 5678), 0);
  EXPECT_EQ(st(m("d/f")).st_uid, 1234u);
  EXPECT_EQ(st(e("d/f")).st_gid, 5678u);
  ASSERT_EQ(::truncate(m("d/f").c_str(), 3), 0);
  EXPECT_EQ(st(m("d/f")).st_size, 3);
  EXPECT_EQ(get(m("d/f")), "hel");
  ASSERT_EQ(::truncate(m("d/f").c_str(), 10000), 0);
  EXPECT_EQ(st(e("d/f")).st_size, 10000);

  // SYMLINK and READLINK.
  ASSERT_EQ(::symlink("d/f", m("s").c_str()), 0);
  char buf[64] = {};
  ASSERT_EQ(::readlink(m("s").c_str(), buf, sizeof buf), 3);
  EXPECT_STREQ(buf, "d/f");
  EXPECT_TRUE(S_ISLNK(st(m("s")).st_mode));

  // RMDIR refuses a full directory, then works.
  EXPECT_NE(::rmdir(m("d").c_str()), 0);
  EXPECT_EQ(errno, ENOTEMPTY);
  ASSERT_EQ(::unlink(m("d/f").c_str()), 0);
  ASSERT_EQ(::rmdir(m("d").c_str()), 0);
  EXPECT_FALSE(std::filesystem::exists(e("d")));
}

TEST_P(FuseMount, TimesFollowUtimensatIncludingNowAndOmit) {
  put(m("t"), "x");
  struct timespec ts[2] = {{1000000000, 5}, {1200000000, 7}};
  ASSERT_EQ(::utimensat(AT_FDCWD, m("t").c_str(), ts, 0), 0);
  struct stat s = st(m("t"));
  EXPECT_EQ(s.st_atim.tv_sec, 1000000000);
  EXPECT_EQ(s.st_mtim.tv_sec, 1200000000);
  EXPECT_EQ(s.st_mtim.tv_nsec, 7);
  struct timespec omit_now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ASSERT_EQ(::utimensat(AT_FDCWD, m("t").c_str(), omit_now, 0), 0);
  s = st(m("t"));
  EXPECT_EQ(s.st_atim.tv_sec, 1000000000);  // left alone
  EXPECT_GT(s.st_mtim.tv_sec, time(nullptr) - 60);
  EXPECT_EQ(st(e("t")).st_mtim.tv_sec, s.st_mtim.tv_sec);
}

TEST_P(FuseMount, RenameNoreplaceIsRefusedCleanly) {
  put(m("a"), "a");
  // NFSv3 has no atomic "rename unless the target exists".
  EXPECT_EQ(::renameat2(AT_FDCWD, m("a").c_str(), AT_FDCWD, m("b").c_str(), RENAME_NOREPLACE), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(get(m("a")), "a");
  EXPECT_FALSE(std::filesystem::exists(e("b")));
}

TEST_P(FuseMount, SpecialFiles) {
  ASSERT_EQ(::mkfifo(m("fifo").c_str(), 0640), 0);
  ASSERT_EQ(::mknod(m("sock").c_str(), S_IFSOCK | 0600, 0), 0);
  ASSERT_EQ(::mknod(m("chr").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
  ASSERT_EQ(::mknod(m("blk").c_str(), S_IFBLK | 0600, makedev(8, 1)), 0);
  ASSERT_EQ(::mknod(m("reg").c_str(), S_IFREG | 0600, 0), 0);
  EXPECT_EQ(st(m("fifo")).st_mode, S_IFIFO | 0640u);
  EXPECT_TRUE(S_ISSOCK(st(e("sock")).st_mode));
  EXPECT_EQ(st(m("chr")).st_rdev, makedev(1, 3));
  EXPECT_EQ(st(e("blk")).st_rdev, makedev(8, 1));
  EXPECT_TRUE(S_ISREG(st(m("reg")).st_mode));
  EXPECT_NE(::mknod(m("reg").c_str(), S_IFREG | 0600, 0), 0);
  EXPECT_EQ(errno, EEXIST);
}

TEST_P(FuseMount, ExclusiveCreate) {
  int fd = ::open(m("x").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0640);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(st(m("x")).st_mode, S_IFREG | 0640u);
  EXPECT_EQ(st(e("x")).st_mode, S_IFREG | 0640u);
  EXPECT_EQ(::open(m("x").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0640), -1);
  EXPECT_EQ(errno, EEXIST);
}

TEST_P(FuseMount, ListsTenThousandEntriesCompletely) {
  std::filesystem::create_directory(e("many"));
  std::set<std::string> made;
  for (int i = 0; i < 10000; ++i) {
    std::string name = "entry-" + std::to_string(i);
    std::ofstream(e("many/" + name));
    made.insert(name);
  }
  std::set<std::string> seen;
  DIR* d = ::opendir(m("many").c_str());
  ASSERT_NE(d, nullptr);
  while (auto* ent = ::readdir(d)) {
    std::string n = ent->d_name;
    if (n != "." && n != "..") {
      EXPECT_TRUE(seen.insert(n).second) << "listed twice: " << n;
    }
  }
  ::closedir(d);
  EXPECT_EQ(seen, made);
}

// Directories opened, listed and closed as fast as two threads can: the
// kernel may send RELEASEDIR as soon as it has a listing, so the client must
// not touch the directory's state after replying (it once unlocked a freed
// mutex there, corrupting whatever reused the memory: nfsrdma-fuse aborted
// under MALLOC_PERTURB_ during `git fsck`).
TEST_P(FuseMount, ListingsClosedAsSoonAsTheyArriveStayWhole) {
  for (int d = 0; d < 8; ++d) {
    std::filesystem::create_directory(e("d" + std::to_string(d)));
    for (int i = 0; i < 20; ++i) std::ofstream(e("d" + std::to_string(d) + "/f" + std::to_string(i)));
  }
  std::atomic<int> wrong{0};
  auto lister = [&](int seed) {
    for (int round = 0; round < 3000; ++round) {
      DIR* dir = ::opendir(m("d" + std::to_string((round + seed) % 8)).c_str());
      if (!dir) {
        ++wrong;
        continue;
      }
      int n = 0;
      while (::readdir(dir)) ++n;
      ::closedir(dir);
      if (n != 22) ++wrong;  // 20 files, "." and ".."
      // A LOOKUP right after: its call state is what reused the freed memory.
      struct stat st {};
      std::string missing = "d" + std::to_string(round % 8) + "/no-" + std::to_string(seed) + "-" + std::to_string(round);
      if (::stat(m(missing).c_str(), &st) == 0 || errno != ENOENT) ++wrong;
    }
  };
  std::thread a(lister, 0), b(lister, 3);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
  struct stat st {};
  EXPECT_EQ(::stat(m("d0").c_str(), &st), 0) << "the mount died";
}

TEST_P(FuseMount, StatfsReportsTheServersNameMax) {
  struct statvfs s {};
  ASSERT_EQ(::statvfs(mount_->path().c_str(), &s), 0);
  EXPECT_EQ(s.f_namemax, 255u);
  EXPECT_GT(s.f_blocks, 0u);
  EXPECT_EQ(::mkdir(m(std::string(256, 'n')).c_str(), 0755), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
}

TEST_P(FuseMount, CallersIdentityReachesTheServer) {
  ASSERT_EQ(::mkdir(m("pub").c_str(), 01777), 0);
  ASSERT_EQ(::chmod(m("pub").c_str(), 01777), 0);
  put(m("rootfile"), "root's");
  // A user's new files are the user's.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] {
    int fd = ::open(m("pub/mine").c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd < 0) return errno;
    ::close(fd);
    return ::mkdir(m("pub/mydir").c_str(), 0755) == 0 ? 0 : errno;
  }), 0);
  EXPECT_EQ(st(e("pub/mine")).st_uid, 1000u);
  EXPECT_EQ(st(e("pub/mine")).st_gid, 1000u);
  EXPECT_EQ(st(e("pub/mydir")).st_uid, 1000u);
  // Permissions are the server's: no writing root's 0644 file.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return ::open(m("rootfile").c_str(), O_WRONLY) < 0 ? errno : 0; }), EACCES);
  // The sticky bit: another user may not remove it.
  int r = as_user(1001, 1001, {}, [&] { return ::unlink(m("pub/mine").c_str()) == 0 ? 0 : errno; });
  EXPECT_TRUE(r == EACCES || r == EPERM) << r;
  EXPECT_TRUE(std::filesystem::exists(e("pub/mine")));
  // Supplementary groups are sent.
  ASSERT_EQ(::mkdir(m("team").c_str(), 0770), 0);
  ASSERT_EQ(::chmod(m("team").c_str(), 0770), 0);  // past the umask
  ASSERT_EQ(::chown(m("team").c_str(), 0, 2000), 0);
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return ::mkdir(m("team/x").c_str(), 0755) == 0 ? 0 : errno; }), EACCES);
  EXPECT_EQ(as_user(1000, 1000, {2000}, [&] { return ::mkdir(m("team/x").c_str(), 0755) == 0 ? 0 : errno; }), 0);
}

TEST_P(FuseMount, LchownActsOnTheLink) {
  put(m("target"), "t");
  ASSERT_EQ(::symlink("target", m("link").c_str()), 0);
  ASSERT_EQ(::lchown(m("link").c_str(), 4321, 4321), 0);
  EXPECT_EQ(st(e("link")).st_uid, 4321u);
  EXPECT_EQ(st(e("target")).st_uid, 0u);
}

TEST_P(FuseMount, CloseToOpenSeesAnotherWritersChanges) {
  put(m("shared"), "version one");
  EXPECT_EQ(get(m("shared")), "version one");
  // Another client (here: the server's own disk) rewrites it, longer.
  put(e("shared"), "version two, longer");
  struct timespec later[2] = {{0, UTIME_NOW}, {2000000000, 0}};
  ::utimensat(AT_FDCWD, e("shared").c_str(), later, 0);
  EXPECT_EQ(get(m("shared")), "version two, longer");
}

// A directory made through the mount is listed as we change it, and a lookup
// of a name it lacks is answered without a call (SmallFilesCostTheCalls...).
// A name made elsewhere is found as soon as a change of ours shows the
// directory changed under us, or once acdirmin has passed; with
// lookupcache=positive, at once.
TEST_P(FuseMount, NamesMadeElsewhereInADirectoryMadeHereAreFound) {
  remount("acdirmin=1");
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  put(m("d/ours"), "x");
  ::usleep(20000);  // past a tick of the server's coarse clock, so the directory's times move
  put(e("d/theirs"), "y");
  ::usleep(20000);
  put(m("d/ours2"), "x");  // its CREATE shows the directory was not as we left it
  EXPECT_EQ(::access(m("d/theirs").c_str(), F_OK), 0);
  EXPECT_EQ(::access(m("d/nothing").c_str(), F_OK), -1);
  ASSERT_EQ(::mkdir(m("d2").c_str(), 0755), 0);
  put(m("d2/ours"), "x");
  put(e("d2/theirs"), "y");
  ::usleep(1100000);
  EXPECT_EQ(::access(m("d2/theirs").c_str(), F_OK), 0) << "after acdirmin";
  // A change the server refuses says the listing is wrong: it goes.
  ASSERT_EQ(::mkdir(m("d4").c_str(), 0755), 0);
  ::usleep(20000);
  put(e("d4/theirs"), "y");
  EXPECT_EQ(::mkdir(m("d4/theirs").c_str(), 0755), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::access(m("d4/theirs").c_str(), F_OK), 0) << "after an EEXIST";
  // A directory others may not search keeps no listing.
  ASSERT_EQ(::mkdir(m("d5").c_str(), 0750), 0);
  put(e("d5/theirs"), "y");
  EXPECT_EQ(::access(m("d5/theirs").c_str(), F_OK), 0) << "mode 0750";
  remount("lookupcache=positive");
  ASSERT_EQ(::mkdir(m("d3").c_str(), 0755), 0);
  put(m("d3/ours"), "x");
  put(e("d3/theirs"), "y");
  EXPECT_EQ(::access(m("d3/theirs").c_str(), F_OK), 0) << "lookupcache=positive";
}

// Once the kernel's entry for a name made here has expired, its LOOKUP is
// answered from the directory's listing while our changes keep confirming
// it, as the kernel client trusts its dentries while the directory is as its
// own changes left it: unlinking files made earlier is one REMOVE each.
// A name replaced elsewhere is found once acdirmin has passed.
TEST_P(FuseMount, ExpiredNamesInADirectoryMadeHereAreAnsweredFromItsListing) {
  const std::uint16_t port = free_port();
  remount("acdirmin=1,metrics=127.0.0.1:" + std::to_string(port));
  auto calls = [&](const char* proc) {
    return metric(scrape(port), std::string("nfsrdma_client_calls_total{proc=\"") + proc + "\"}");
  };
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  constexpr int kFiles = 40;
  for (int i = 0; i < kFiles; ++i) put(m("d/f" + std::to_string(i)), std::string(i, 'x'));
  ::usleep(1100000);  // every entry expired, and the listing's last confirmation
  const double lookups = calls("LOOKUP"), removes = calls("REMOVE");
  for (int i = 0; i < kFiles; i += 2) {
    EXPECT_EQ(st(m("d/f" + std::to_string(i))).st_size, i) << "the server's size";
    ASSERT_EQ(::unlink(m("d/f" + std::to_string(i)).c_str()), 0);
    EXPECT_FALSE(std::filesystem::exists(e("d/f" + std::to_string(i))));
  }
  // A LOOKUP each would be kFiles / 2 and more: d's (its entry in the root
  // expires each second), and the first in it, which confirms the listing.
  EXPECT_LE(calls("LOOKUP") - lookups, kFiles / 8);
  EXPECT_EQ(calls("REMOVE") - removes, kFiles / 2);
  // Replaced elsewhere: the new file once acdirmin has passed.
  put(e("d/new"), "theirs");
  ASSERT_EQ(::rename(e("d/new").c_str(), e("d/f3").c_str()), 0);
  ::usleep(1100000);
  EXPECT_EQ(get(m("d/f3")), "theirs");
  EXPECT_EQ(st(m("d/f3")).st_ino, st(e("d/f3")).st_ino);
  // Removed elsewhere while our changes keep the listing confirmed: the
  // LOOKUP of d, its entry expired, shows d changed, and the listing goes.
  ASSERT_EQ(::mkdir(m("d2").c_str(), 0755), 0);
  put(m("d2/x"), "x");
  ::usleep(600000);
  put(m("d2/y"), "y");  // confirms the listing; x's and d2's entries expire first
  ::usleep(20000);       // past a tick of the server's coarse clock
  ASSERT_EQ(::unlink(e("d2/x").c_str()), 0);
  ::usleep(500000);
  EXPECT_EQ(::access(m("d2/x").c_str(), F_OK), -1) << "removed elsewhere";
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseMount, ::testing::Values("rdma", "tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
