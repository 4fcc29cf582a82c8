// Permissions on the mount, for every caller: search permission on each
// directory of a path, checked on every walk and not only when a name was
// first looked up; a FIFO's mode at open (FUSE sends no OPEN for it); and a
// root the server squashes to nobody, whom the kernel would let through as
// local root, answered by the server.
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "tests/fuse_fixture.hpp"

namespace nfsrdma::test {
namespace {

int err_of(int rc) { return rc == 0 ? 0 : errno; }

// What each way of reaching dir/file through a path fails with (0: it worked).
struct Reach {
  int stat_, open_, chmod_, chown_, truncate_, link_;
  bool operator==(const Reach&) const = default;
};
std::ostream& operator<<(std::ostream& o, const Reach& r) {
  return o << "stat " << r.stat_ << ", open " << r.open_ << ", chmod " << r.chmod_ << ", chown " << r.chown_
           << ", truncate " << r.truncate_ << ", link " << r.link_;
}
Reach reach(const std::string& file, const std::string& link_to, uid_t uid, gid_t gid) {
  Reach r{};
  struct stat s {};
  r.stat_ = err_of(::stat(file.c_str(), &s));
  int fd = ::open(file.c_str(), O_RDONLY);
  r.open_ = fd >= 0 ? 0 : errno;
  if (fd >= 0) ::close(fd);
  r.chmod_ = err_of(::chmod(file.c_str(), 0666));
  r.chown_ = err_of(::chown(file.c_str(), uid, gid));
  r.truncate_ = err_of(::truncate(file.c_str(), 4));
  r.link_ = err_of(::link(file.c_str(), link_to.c_str()));
  return r;
}
constexpr Reach kDenied{EACCES, EACCES, EACCES, EACCES, EACCES, EACCES};

TEST_P(FuseMount, SearchPermissionIsCheckedOnEveryWalkForEveryCaller) {
  ASSERT_EQ(::mkdir(m("pub").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(m("pub").c_str(), 01777), 0);
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  ASSERT_EQ(::chown(m("d").c_str(), 1000, 1000), 0);
  put(m("d/f"), "some data");
  ASSERT_EQ(::chown(m("d/f").c_str(), 1001, 1001), 0);
  ASSERT_EQ(::chmod(m("d/f").c_str(), 0666), 0);
  // 1001 reaches its file, so the kernel has the names cached; then d's owner closes d.
  EXPECT_EQ(as_user(1001, 1001, {}, [&] { return ::access(m("d/f").c_str(), R_OK) == 0 ? 0 : errno; }), 0);
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return err_of(::chmod(m("d").c_str(), 0644)); }), 0);
  for (uid_t uid : {1001u, 1000u}) {  // the file's owner, and d's (whose mode lost its search bit too)
    EXPECT_EQ(as_user(uid, uid, {}, [&] {
      Reach r = reach(m("d/f"), m("pub/l" + std::to_string(uid)), uid, uid);
      if (r == kDenied) return 0;
      std::cerr << "uid " << uid << ": " << r << "\n";
      return 1;
    }), 0) << "uid " << uid;
  }
  EXPECT_EQ(get(e("d/f")), "some data");
  EXPECT_EQ(st(e("d/f")).st_mode & 07777, 0666u);
  // Given back, it works again at once.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return err_of(::chmod(m("d").c_str(), 0711)); }), 0);
  EXPECT_EQ(as_user(1001, 1001, {}, [&] {
    Reach r = reach(m("d/f"), m("pub/l"), 1001, 1001);
    if (r == Reach{}) return 0;
    std::cerr << "reopened: " << r << "\n";
    return 1;
  }), 0);
}

TEST_P(FuseMount, OpeningAFifoChecksItsMode) {
  ASSERT_EQ(::mkfifo(m("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::chmod(m("fifo").c_str(), 0600), 0);
  auto open_as_user = [&](int flags) {
    return as_user(1000, 1000, {}, [&] {
      int fd = ::open(m("fifo").c_str(), flags | O_NONBLOCK);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    });
  };
  EXPECT_EQ(open_as_user(O_RDONLY), EACCES);
  EXPECT_EQ(open_as_user(O_WRONLY), EACCES);
  ASSERT_EQ(::chmod(m("fifo").c_str(), 0644), 0);
  EXPECT_EQ(open_as_user(O_RDONLY), 0);
  EXPECT_EQ(open_as_user(O_WRONLY), EACCES);
}

// Until `path` fails with `err`, or 2 s: a directory's cached entry is
// dropped just after the chmod that closed it returns.
int stat_until(const std::string& path, int err) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  struct stat s {};
  int got;
  while ((got = err_of(::stat(path.c_str(), &s))) != err && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return got;
}

TEST_P(FuseMount, RootSquashedToNobodyGetsTheServersAnswer) {
  std::string sq = dir_.path() + "/squashed";
  ASSERT_EQ(::mkdir(sq.c_str(), 0755), 0);
  for (const char* d : {"/open", "/closed"}) {
    ASSERT_EQ(::mkdir((sq + d).c_str(), 0755), 0);
    put(sq + d + "/f", "owned by 1000");
    ASSERT_EQ(::chown((sq + d + "/f").c_str(), 1000, 1000), 0);
    ASSERT_EQ(::chmod((sq + d + "/f").c_str(), 0666), 0);
    ASSERT_EQ(::chown((sq + d).c_str(), 1000, 1000), 0);
  }
  ASSERT_EQ(::chmod((sq + "/closed").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((sq + "/group").c_str(), 0750), 0);
  put(sq + "/group/f", "staff's");
  ASSERT_EQ(::chown((sq + "/group").c_str(), 1000, 50), 0);
  ServerProcess server({sq + " 127.0.0.1(rw,root_squash)"});
  MountProcess mnt("127.0.0.1:" + sq, mount_options(server, GetParam()));
  // Squashed root keeps its other groups: root in group 50 may search a
  // 0750 directory of group 50, plain root may not, though the kernel now
  // has the name (what one root caller may search is not every root's).
  EXPECT_EQ(as_user(0, 50, {50}, [&] { return err_of(::access((mnt / "group/f").c_str(), F_OK)); }), 0);
  EXPECT_EQ(reach(mnt / "group/f", mnt / "l", 0, 0), kDenied);
  // Never searchable by nobody: refused every time, though its owner just
  // walked it and so the kernel has the names.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return err_of(::access((mnt / "closed/f").c_str(), R_OK)); }), 0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(reach(mnt / "closed/f", mnt / "l", 0, 0), kDenied) << "try " << i;
  }
  // Searchable when root looked (so the kernel cached the names), then closed by its owner.
  EXPECT_EQ(get(mnt / "open/f"), "owned by 1000");
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return err_of(::chmod((mnt / "open").c_str(), 0700)); }), 0);
  EXPECT_EQ(stat_until(mnt / "open/f", EACCES), EACCES);
  EXPECT_EQ(reach(mnt / "open/f", mnt / "l", 0, 0), kDenied);
  EXPECT_EQ(get(sq + "/open/f"), "owned by 1000");
  // Reopened: root reaches it again as nobody, who may write a 0666 file but not chmod it.
  EXPECT_EQ(as_user(1000, 1000, {}, [&] { return err_of(::chmod((mnt / "open").c_str(), 0755)); }), 0);
  EXPECT_EQ(stat_until(mnt / "open/f", 0), 0);
  EXPECT_EQ(err_of(::truncate((mnt / "open/f").c_str(), 5)), 0);
  EXPECT_EQ(err_of(::chmod((mnt / "open/f").c_str(), 0600)), EPERM);
  EXPECT_EQ(get(sq + "/open/f"), "owned");
  std::string log = mnt.log();
  for (const char* bad : {"critical", "Sanitizer", "runtime error"}) EXPECT_EQ(log.find(bad), std::string::npos) << log;
}

INSTANTIATE_TEST_SUITE_P(Transports, FuseMount, ::testing::Values("rdma", "tcp"), transport_name);

}  // namespace
}  // namespace nfsrdma::test
