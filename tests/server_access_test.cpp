// Who may do what: identities and squashing, read-only exports, client lists,
// secure ports, forged handles, and the RPC-level answers to bad calls.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <atomic>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include "lib/base/fd.hpp"
#include "lib/transport/tcp/record.hpp"
#include "lib/transport/tcp/socket.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

class ServerAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    std::filesystem::create_directory(dir_.path() + "/ro");
    std::filesystem::permissions(dir_.path(), std::filesystem::perms::all);
  }
  void start(std::vector<std::string> exports, std::vector<std::string> extra = {}) {
    server_ = std::make_unique<ServerProcess>(std::move(exports), std::move(extra));
  }
  void TearDown() override {
    if (server_ && HasFailure()) std::cerr << "server log:\n" << server_->log();
  }
  uid_t owner(const std::string& name) {
    struct stat st {};
    if (::lstat((dir_.path() + "/" + name).c_str(), &st) != 0) return static_cast<uid_t>(-1);
    return st.st_uid;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerAccess, RootSquashMapsRootToNobodyByDefault) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  Client c(*server_);
  nfs_fh3 root = c.mount_root(dir_.path());
  c.create(root, "by-root");
  EXPECT_EQ(owner("by-root"), 65534u);
  c.as = {1000, 1000, {}};
  c.create(root, "by-user");
  EXPECT_EQ(owner("by-user"), 1000u);
}

// Identities are per worker thread (raw setfsuid/setgroups): callers running at
// the same time never see each other's identity.
TEST_F(ServerAccess, ConcurrentCallersKeepTheirOwnIdentities) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  constexpr int kCallers = 6, kFiles = 40;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      try {
        Client c(*server_);
        c.as = {2000u + t, 3000u + t, {}};
        nfs_fh3 root = c.mount_root(dir_.path());
        for (int i = 0; i < kFiles; ++i) c.create(root, "u" + std::to_string(t) + "-" + std::to_string(i));
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(errors, 0);
  for (int t = 0; t < kCallers; ++t) {
    for (int i = 0; i < kFiles; ++i) {
      struct stat st {};
      std::string name = dir_.path() + "/u" + std::to_string(t) + "-" + std::to_string(i);
      ASSERT_EQ(::stat(name.c_str(), &st), 0) << name;
      EXPECT_EQ(st.st_uid, 2000u + t) << name;
      EXPECT_EQ(st.st_gid, 3000u + t) << name;
    }
  }
}

TEST_F(ServerAccess, AllSquashUsesAnonuid) {
  start({dir_.path() + " 127.0.0.1(rw,all_squash,anonuid=1234,anongid=4321)"});
  Client c(*server_);
  c.as = {1000, 1000, {}};
  nfs_fh3 root = c.mount_root(dir_.path());
  c.create(root, "squashed");
  struct stat st {};
  ASSERT_EQ(::stat((dir_.path() + "/squashed").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 4321u);
}

TEST_F(ServerAccess, KernelPermissionChecksApplyToTheCaller) {
  start({dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
  Client root_client(*server_);
  nfs_fh3 root = root_client.mount_root(dir_.path());
  nfs_fh3 secret = root_client.create(root, "secret", 0600);
  root_client.write(secret, 0, "root only");
  Client user(*server_);
  user.as = {1000, 1000, {}};
  EXPECT_EQ(user.call<READ3res>(Proc::READ, READ3args{secret, 0, 10}).status, NFS3ERR_ACCES);
  WRITE3args w{secret, 0, 1, stable_how::FILE_SYNC, {reinterpret_cast<const std::uint8_t*>("x"), 1}};
  EXPECT_EQ(user.call<WRITE3res>(Proc::WRITE, w).status, NFS3ERR_ACCES);
  auto acc = user.call<ACCESS3res>(Proc::ACCESS, ACCESS3args{secret, ACCESS3_READ | ACCESS3_MODIFY});
  ASSERT_EQ(acc.status, NFS3_OK);
  EXPECT_EQ(acc.access, 0u);
  SETATTR3args chmod;
  chmod.object = secret;
  chmod.new_attributes.mode = 0777;
  EXPECT_EQ(user.call<WccRes>(Proc::SETATTR, chmod).status, NFS3ERR_PERM);
  // Supplementary groups count: group 77 may read a 0640 file of group 77.
  nfs_fh3 grp = root_client.create(root, "group-file", 0640);
  root_client.write(grp, 0, "team");
  SETATTR3args chgrp;
  chgrp.object = grp;
  chgrp.new_attributes.gid = 77;
  ASSERT_EQ(root_client.call<WccRes>(Proc::SETATTR, chgrp).status, NFS3_OK);
  user.as = {1000, 1000, {5, 77}};
  EXPECT_EQ(user.read(grp, 0, 10), "team");
}

TEST_F(ServerAccess, OwnerMayWriteTheirOwnReadOnlyFile) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  Client c(*server_);
  c.as = {1000, 1000, {}};
  nfs_fh3 root = c.mount_root(dir_.path());
  nfs_fh3 f = c.create(root, "ro-for-owner", 0444);
  c.write(f, 0, "still writable by its owner");  // as with `cp` of a 0444 file over NFS
  EXPECT_EQ(c.read(f, 0, 5), "still");
}

// The owner's override stops at what nfsd refuses even an owner: writing an
// immutable file is EPERM, for a file the server holds open too. Tried in the
// test's own directory and on /dev/shm: tmpfs lets an immutable file be
// written through a descriptor opened before, so there only the server's
// check refuses it.
TEST_F(ServerAccess, NobodyWritesAnImmutableFileItsOwnerIncluded) {
  std::optional<TempDir> shm;
  std::vector<std::string> dirs{dir_.path()};
  if (std::filesystem::is_directory("/dev/shm")) {
    shm.emplace("/dev/shm");
    std::filesystem::permissions(shm->path(), std::filesystem::perms::all);
    dirs.push_back(shm->path());
  }
  std::vector<std::string> exports;
  for (const auto& d : dirs) exports.push_back(d + " 127.0.0.1(rw)");
  start(exports);
  auto set_immutable = [](const std::string& path, bool on) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    int flags = 0;
    if (!fd.valid() || ::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0) return false;
    flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    return ::ioctl(fd.get(), FS_IOC_SETFLAGS, &flags) == 0;
  };
  int tried = 0;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    Client c(*server_);
    c.as = {1000, 1000, {}};
    nfs_fh3 root = c.mount_root(dir);
    nfs_fh3 f = c.create(root, "fixed", 0644);
    c.write(f, 0, "before");  // now open for writing in the server
    const std::string path = dir + "/fixed";
    if (!set_immutable(path, true)) {
      std::cerr << dir << " has no immutable files (" << std::strerror(errno) << "): not tried there\n";
      continue;
    }
    ++tried;
    struct Mutable {  // however the test ends, or the file outlives it
      decltype(set_immutable)& set;
      const std::string& path;
      ~Mutable() { set(path, false); }
    } undo{set_immutable, path};
    static const std::uint8_t kData[] = {'x'};
    auto write = [&] { return c.call<WRITE3res>(Proc::WRITE, WRITE3args{f, 0, 1, stable_how::FILE_SYNC, kData}).status; };
    EXPECT_EQ(write(), NFS3ERR_PERM);
    EXPECT_EQ(c.read(f, 0, 6), "before");  // reading it is still the owner's
    ASSERT_TRUE(set_immutable(path, false));
    EXPECT_EQ(write(), NFS3_OK);
  }
  if (tried == 0) GTEST_SKIP() << "no filesystem here takes the immutable attribute (CAP_LINUX_IMMUTABLE?)";
}

TEST_F(ServerAccess, ReadOnlyExportRefusesEveryModifyingProcedure) {
  std::ofstream(dir_.path() + "/ro/file") << "content";
  start({dir_.path() + "/ro 127.0.0.1(ro,no_root_squash)"});
  Client c(*server_);
  nfs_fh3 root = c.mount_root(dir_.path() + "/ro");
  nfs_fh3 f = c.lookup(root, "file");
  EXPECT_EQ(c.read(f, 0, 7), "content");
  SETATTR3args sa;
  sa.object = f;
  sa.new_attributes.mode = 0600;
  EXPECT_EQ(c.call<WccRes>(Proc::SETATTR, sa).status, NFS3ERR_ROFS);
  WRITE3args w{f, 0, 1, stable_how::FILE_SYNC, {reinterpret_cast<const std::uint8_t*>("x"), 1}};
  EXPECT_EQ(c.call<WRITE3res>(Proc::WRITE, w).status, NFS3ERR_ROFS);
  CREATE3args cr;
  cr.where = {root, "new"};
  EXPECT_EQ(c.call<CreateRes>(Proc::CREATE, cr).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<CreateRes>(Proc::MKDIR, MKDIR3args{{root, "d"}, {}}).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<CreateRes>(Proc::SYMLINK, SYMLINK3args{{root, "l"}, {}, "x"}).status, NFS3ERR_ROFS);
  MKNOD3args mk;
  mk.where = {root, "p"};
  EXPECT_EQ(c.call<CreateRes>(Proc::MKNOD, mk).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<WccRes>(Proc::REMOVE, diropargs3{root, "file"}).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<WccRes>(Proc::RMDIR, diropargs3{root, "file"}).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<RENAME3res>(Proc::RENAME, RENAME3args{{root, "file"}, {root, "x"}}).status, NFS3ERR_ROFS);
  EXPECT_EQ(c.call<LINK3res>(Proc::LINK, LINK3args{f, {root, "x"}}).status, NFS3ERR_ROFS);
  auto acc = c.call<ACCESS3res>(Proc::ACCESS, ACCESS3args{f, ACCESS3_READ | ACCESS3_MODIFY});
  EXPECT_EQ(acc.access, ACCESS3_READ);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/ro/file"));
}

TEST_F(ServerAccess, ClientOutsideTheListIsRefusedAtMountAndEveryCall) {
  start({dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
  Client allowed(*server_);
  nfs_fh3 root = allowed.mount_root(dir_.path());
  nfs_fh3 f = allowed.create(root, "f");
  Client stranger(*server_, "127.0.0.3");
  auto m = stranger.mnt(dir_.path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, mount3::MNT3ERR_ACCES);
  EXPECT_EQ(stranger.call<GETATTR3res>(Proc::GETATTR, FhArgs{root}).status, NFS3ERR_ACCES);
  EXPECT_EQ(stranger.call<READ3res>(Proc::READ, READ3args{f, 0, 1}).status, NFS3ERR_ACCES);
  EXPECT_EQ(stranger.call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root, "f"}).status, NFS3ERR_ACCES);
  EXPECT_EQ(stranger.call<WccRes>(Proc::REMOVE, diropargs3{root, "f"}).status, NFS3ERR_ACCES);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/f"));
}

TEST_F(ServerAccess, SecureExportsRequireAReservedPort) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  Client insecure(*server_, "", /*reserved_port=*/false);
  auto m = insecure.mnt(dir_.path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, mount3::MNT3ERR_PERM);
  Client secure(*server_);
  nfs_fh3 root = secure.mount_root(dir_.path());
  EXPECT_EQ(insecure.call<GETATTR3res>(Proc::GETATTR, FhArgs{root}).status, NFS3ERR_PERM);
}

// A reserved port still held by a connection to this server (in TIME_WAIT,
// say) binds but cannot connect: the client passes on to the next one.
TEST_F(ServerAccess, AReservedPortTakenForThisServerIsPassedOver) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  auto addr = [&](std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  };
  Fd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(holder.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in from = addr(1023), to = addr(server_->nfs_port());
  if (::bind(holder.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) GTEST_SKIP() << "port 1023 is busy";
  ASSERT_EQ(::connect(holder.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  auto fd = tcp::connect_tcp("127.0.0.1", server_->nfs_port(), true);
  ASSERT_TRUE(fd.ok()) << fd.error().describe();
  EXPECT_LT(tcp::local_port(fd->get()), 1023);
  Client secure(*server_);
  EXPECT_EQ(secure.getattr(secure.mount_root(dir_.path())).type, NF3DIR);
}

TEST_F(ServerAccess, ForgedAndCrossExportHandles) {
  std::filesystem::create_directory(dir_.path() + "/other");
  start({dir_.path() + "/ro 127.0.0.1(rw,no_root_squash)", dir_.path() + "/other 127.0.0.1(rw,no_root_squash)"});
  Client c(*server_);
  nfs_fh3 a = c.mount_root(dir_.path() + "/ro");
  nfs_fh3 b = c.mount_root(dir_.path() + "/other");
  nfs_fh3 forged = a;
  forged.data[12] ^= 0x01;  // point the kernel handle elsewhere
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{forged}).status, NFS3ERR_BADHANDLE);
  nfs_fh3 moved = a;
  moved.data[7] ^= 0x01;  // claim another export id
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{moved}).status, NFS3ERR_BADHANDLE);
  nfs_fh3 shortened = a;
  shortened.len = 10;
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{shortened}).status, NFS3ERR_BADHANDLE);
  nfs_fh3 f = c.create(a, "f");
  EXPECT_EQ(c.call<RENAME3res>(Proc::RENAME, RENAME3args{{a, "f"}, {b, "f"}}).status, NFS3ERR_XDEV);
  EXPECT_EQ(c.call<LINK3res>(Proc::LINK, LINK3args{f, {b, "f"}}).status, NFS3ERR_XDEV);
}

std::uint32_t accept_stat_of(const std::vector<std::uint8_t>& reply, rpc::ReplyHeader& h) {
  xdr::Decoder d(reply);
  auto r = rpc::decode_reply(d);
  if (!r) return 99;
  h = *r;
  return static_cast<std::uint32_t>(r->accept);
}

// READ and WRITE keep their files open between calls (server/open_files.hpp):
// each call is still checked for its own caller, the file's mode now and the
// name it still has.
TEST_F(ServerAccess, KeptOpenFilesAreCheckedForEveryCall) {
  start({dir_.path() + " 127.0.0.1(rw)"});
  Client owner(*server_), other(*server_);
  owner.as = {1000, 1000, {}};
  other.as = {1001, 1001, {}};
  nfs_fh3 root = owner.mount_root(dir_.path());
  other.mount_root(dir_.path());
  nfs_fh3 f = owner.create(root, "mine", 0644);
  owner.write(f, 0, "twelve bytes");
  EXPECT_EQ(other.read(f, 0, 12), "twelve bytes");  // both now open in the server
  auto status = [&](Client& c, Proc proc) {
    static const std::uint8_t kData[] = {'x'};
    if (proc == Proc::READ) return c.call<READ3res>(proc, READ3args{f, 0, 12}).status;
    return c.call<WRITE3res>(proc, WRITE3args{f, 0, 1, stable_how::FILE_SYNC, kData}).status;
  };
  EXPECT_EQ(status(other, Proc::WRITE), NFS3ERR_ACCES);  // 0644: not 1001's to write
  ASSERT_EQ(::chmod((dir_.path() + "/mine").c_str(), 0600), 0);
  EXPECT_EQ(status(other, Proc::READ), NFS3ERR_ACCES);   // the mode now, not when opened
  ASSERT_EQ(::chmod((dir_.path() + "/mine").c_str(), 0), 0);
  EXPECT_EQ(status(owner, Proc::READ), NFS3_OK);  // the owner's override, as before
  EXPECT_EQ(status(owner, Proc::WRITE), NFS3_OK);
  // The owner now, not when opened: given away, the file is its new owner's to read.
  ASSERT_EQ(::chown((dir_.path() + "/mine").c_str(), 1001, 1001), 0);
  ASSERT_EQ(::chmod((dir_.path() + "/mine").c_str(), 0600), 0);
  EXPECT_EQ(status(owner, Proc::READ), NFS3ERR_ACCES);
  EXPECT_EQ(status(other, Proc::READ), NFS3_OK);
  // Removed on the server itself: stale, as a reopen by handle would say.
  ASSERT_EQ(::unlink((dir_.path() + "/mine").c_str()), 0);
  EXPECT_EQ(status(owner, Proc::READ), NFS3ERR_STALE);
  EXPECT_EQ(status(owner, Proc::WRITE), NFS3ERR_STALE);
  // Removed over NFS while open: stale too, and renamed over likewise.
  nfs_fh3 g = owner.create(root, "gone", 0644);
  owner.write(g, 0, "data");
  EXPECT_EQ(owner.call<WccRes>(Proc::REMOVE, diropargs3{root, "gone"}).status, NFS3_OK);
  EXPECT_EQ(owner.call<READ3res>(Proc::READ, READ3args{g, 0, 4}).status, NFS3ERR_STALE);
  nfs_fh3 h = owner.create(root, "replaced", 0644);
  owner.write(h, 0, "old");
  owner.create(root, "new", 0644);
  EXPECT_EQ(owner.call<RENAME3res>(Proc::RENAME, RENAME3args{{root, "new"}, {root, "replaced"}}).status, NFS3_OK);
  EXPECT_EQ(owner.call<READ3res>(Proc::READ, READ3args{h, 0, 3}).status, NFS3ERR_STALE);
}

TEST_F(ServerAccess, RpcLevelErrors) {
  start({dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
  Client c(*server_);
  rpc::ReplyHeader h;
  auto reply = raw_call(c.nfs(), 1, make_call(1, 100005, 3, 0, {}));  // MOUNT on the NFS port
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(accept_stat_of(*reply, h), static_cast<std::uint32_t>(rpc::AcceptStat::prog_unavail));
  reply = raw_call(c.nfs(), 2, make_call(2, kProgram, 2, 0, {}));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(accept_stat_of(*reply, h), static_cast<std::uint32_t>(rpc::AcceptStat::prog_mismatch));
  EXPECT_EQ(h.low, 3u);
  EXPECT_EQ(h.high, 3u);
  reply = raw_call(c.nfs(), 3, make_call(3, kProgram, 3, 99, {}));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(accept_stat_of(*reply, h), static_cast<std::uint32_t>(rpc::AcceptStat::proc_unavail));
  reply = raw_call(c.nfs(), 4, make_call(4, kProgram, 3, 1, {0, 0, 0, 64}));  // a 64-byte handle, absent
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(accept_stat_of(*reply, h), static_cast<std::uint32_t>(rpc::AcceptStat::garbage_args));
  auto bad_version = make_call(5, kProgram, 3, 0, {});
  bad_version[11] = 3;  // rpcvers 3
  reply = raw_call(c.nfs(), 5, bad_version);
  ASSERT_TRUE(reply.ok());
  accept_stat_of(*reply, h);
  EXPECT_EQ(h.stat, rpc::ReplyStat::denied);
  EXPECT_EQ(h.reject, rpc::RejectStat::rpc_mismatch);
  auto gss = make_call(6, kProgram, 3, 0, {});
  gss[27] = 6;  // cred flavor RPCSEC_GSS
  reply = raw_call(c.nfs(), 6, gss);
  ASSERT_TRUE(reply.ok());
  accept_stat_of(*reply, h);
  EXPECT_EQ(h.stat, rpc::ReplyStat::denied);
  EXPECT_EQ(h.reject, rpc::RejectStat::auth_error);
  // The connection is still good after all of that.
  EXPECT_EQ(c.getattr(c.mount_root(dir_.path())).type, NF3DIR);
}

TEST_F(ServerAccess, OversizedRecordClosesOnlyThatConnection) {
  start({dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
  Client good(*server_);
  nfs_fh3 root = good.mount_root(dir_.path());
  auto fd = tcp::connect_tcp("127.0.0.1", server_->nfs_port(), false);
  ASSERT_TRUE(fd.ok());
  auto mark = tcp::record_mark(0x7fffffff);
  ASSERT_EQ(::send(fd->get(), mark.data(), 4, MSG_NOSIGNAL), 4);
  char byte;
  EXPECT_EQ(::recv(fd->get(), &byte, 1, 0), 0);  // the server hung up
  EXPECT_EQ(good.getattr(root).type, NF3DIR);
  EXPECT_NE(server_->log().find("exceeds the limit"), std::string::npos);
}

TEST_F(ServerAccess, BadConfigurationFailsWithOneLine) {
  ServerProcess* none = nullptr;
  (void)none;
  EXPECT_THROW(start({"/does/not/exist"}), std::runtime_error);
  EXPECT_THROW(start({dir_.path() + " 10.0.0.0/40(rw)"}), std::runtime_error);
}

}  // namespace
}  // namespace nfsrdma::test
