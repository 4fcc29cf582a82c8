// Every NFSv3 and MOUNTv3 procedure against the real server on a temporary
// export, through our own TCP client.
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

class ServerProcs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{dir_.path() + " 127.0.0.1(rw,no_root_squash)"});
    client_ = std::make_unique<Client>(*server_);
    root_ = client_->mount_root(dir_.path());
  }
  void TearDown() override {
    if (server_ && HasFailure()) std::cerr << "server log:\n" << server_->log();
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
  nfs_fh3 root_;
};

TEST_F(ServerProcs, NullGetattrAndFsinfo) {
  auto n = rpc::call_sync(client_->nfs(), kProgram, kVersion, 0, {}, client_->auth(), 5000);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->empty());
  fattr3 a = client_->getattr(root_);
  EXPECT_EQ(a.type, NF3DIR);
  auto fi = client_->call<FSINFO3res>(Proc::FSINFO, FhArgs{root_});
  ASSERT_EQ(fi.status, NFS3_OK);
  EXPECT_EQ(fi.rtmax, 1u << 20);
  EXPECT_EQ(fi.wtmax, 1u << 20);
  EXPECT_TRUE(fi.properties & FSF3_SYMLINK);
  auto pc = client_->call<PATHCONF3res>(Proc::PATHCONF, FhArgs{root_});
  ASSERT_EQ(pc.status, NFS3_OK);
  EXPECT_EQ(pc.name_max, 255u);
  auto fs = client_->call<FSSTAT3res>(Proc::FSSTAT, FhArgs{root_});
  ASSERT_EQ(fs.status, NFS3_OK);
  EXPECT_GT(fs.tbytes, 0u);
  EXPECT_GE(fs.fbytes, fs.abytes);
}

TEST_F(ServerProcs, WriteReadCommitWithWcc) {
  nfs_fh3 f = client_->create(root_, "data");
  client_->write(f, 0, "hello ", stable_how::UNSTABLE);
  WRITE3args a{f, 6, 5, stable_how::FILE_SYNC, {reinterpret_cast<const std::uint8_t*>("world"), 5}};
  auto w = client_->call<WRITE3res>(Proc::WRITE, a);
  ASSERT_EQ(w.status, NFS3_OK);
  EXPECT_EQ(w.count, 5u);
  EXPECT_EQ(w.committed, stable_how::FILE_SYNC);
  ASSERT_TRUE(w.file_wcc.before && w.file_wcc.after);
  EXPECT_EQ(w.file_wcc.before->size, 6u);
  EXPECT_EQ(w.file_wcc.after->size, 11u);
  auto c = client_->call<COMMIT3res>(Proc::COMMIT, COMMIT3args{f, 0, 0});
  ASSERT_EQ(c.status, NFS3_OK);
  EXPECT_EQ(c.verf, w.verf);
  auto r = client_->call<READ3res>(Proc::READ, READ3args{f, 0, 100});
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.count, 11u);
  EXPECT_TRUE(r.eof);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.data.data()), r.data.size()), "hello world");
  auto partial = client_->call<READ3res>(Proc::READ, READ3args{f, 2, 3});
  EXPECT_FALSE(partial.eof);
  EXPECT_EQ(client_->read(f, 6, 5), "world");
  std::ifstream disk(dir_.path() + "/data");
  std::string content((std::istreambuf_iterator<char>(disk)), {});
  EXPECT_EQ(content, "hello world");
}

TEST_F(ServerProcs, LargeReadAndWriteOfOneMebibyte) {
  nfs_fh3 f = client_->create(root_, "big");
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  client_->write(f, 0, data);
  EXPECT_EQ(client_->read(f, 0, 1 << 20), data);
  EXPECT_EQ(client_->getattr(f).size, 1u << 20);
}

TEST_F(ServerProcs, CommitVerifierChangesAndHandlesSurviveRestart) {
  nfs_fh3 f = client_->create(root_, "persist");
  client_->write(f, 0, "abc", stable_how::UNSTABLE);
  auto before = client_->call<COMMIT3res>(Proc::COMMIT, COMMIT3args{f, 0, 0});
  ASSERT_EQ(before.status, NFS3_OK);
  server_->stop();
  EXPECT_TRUE(WIFEXITED(server_->last_status()) && WEXITSTATUS(server_->last_status()) == 0);
  server_->start();
  Client again(*server_);
  EXPECT_EQ(again.read(f, 0, 3), "abc");  // the old handle works without a new MNT
  auto after = again.call<COMMIT3res>(Proc::COMMIT, COMMIT3args{f, 0, 0});
  ASSERT_EQ(after.status, NFS3_OK);
  EXPECT_NE(before.verf, after.verf);
}

TEST_F(ServerProcs, ExclusiveCreateRetransmitSucceeds) {
  CREATE3args a;
  a.where = {root_, "excl"};
  a.mode = createmode3::EXCLUSIVE;
  a.verf = {1, 2, 3, 4, 5, 6, 7, 8};
  auto first = client_->call<CreateRes>(Proc::CREATE, a);
  ASSERT_EQ(first.status, NFS3_OK);
  // A retransmission with a new xid (the DRC cannot help): the verifier matches.
  auto again = client_->call<CreateRes>(Proc::CREATE, a);
  ASSERT_EQ(again.status, NFS3_OK);
  EXPECT_EQ(*again.obj, *first.obj);
  a.verf[0] = 9;
  EXPECT_EQ(client_->call<CreateRes>(Proc::CREATE, a).status, NFS3ERR_EXIST);
  CREATE3args g;
  g.where = {root_, "excl"};
  g.mode = createmode3::GUARDED;
  EXPECT_EQ(client_->call<CreateRes>(Proc::CREATE, g).status, NFS3ERR_EXIST);
  g.mode = createmode3::UNCHECKED;
  g.obj_attributes.size = 0;
  EXPECT_EQ(client_->call<CreateRes>(Proc::CREATE, g).status, NFS3_OK);
}

TEST_F(ServerProcs, DuplicateRequestCacheReplaysRemove) {
  client_->create(root_, "victim");
  std::vector<std::uint8_t> args;
  xdr::encode(args, diropargs3{root_, "victim"});
  auto msg = make_call(0x5150, kProgram, kVersion, static_cast<std::uint32_t>(Proc::REMOVE), args);
  // The second attempt comes over a new connection from a new source port, as a
  // client retransmits after reconnecting: the cache keys on address, not port.
  Client reconnected(*server_);
  for (int i = 0; i < 2; ++i) {
    auto reply = raw_call(i == 0 ? client_->nfs() : reconnected.nfs(), 0x5150, msg);
    ASSERT_TRUE(reply.ok());
    xdr::Decoder d(*reply);
    ASSERT_TRUE(rpc::check_reply(d, 0x5150).ok());
    WccRes r;
    ASSERT_TRUE(xdr::decode(d, r).ok());
    EXPECT_EQ(r.status, NFS3_OK) << "attempt " << i;  // not NOENT: the first reply was replayed
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/victim"));
}

TEST_F(ServerProcs, SetattrModeSizeTimesAndGuard) {
  nfs_fh3 f = client_->create(root_, "attrs");
  client_->write(f, 0, "0123456789");
  fattr3 before = client_->getattr(f);
  SETATTR3args a;
  a.object = f;
  a.new_attributes.mode = 0600;
  a.new_attributes.size = 4;
  a.new_attributes.mtime = {time_how::SET_TO_CLIENT_TIME, {1000000, 5}};
  a.guard = before.ctime;
  auto r = client_->call<WccRes>(Proc::SETATTR, a);
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_TRUE(r.wcc.after);
  EXPECT_EQ(r.wcc.after->mode, 0600u);
  EXPECT_EQ(r.wcc.after->size, 4u);
  EXPECT_EQ(r.wcc.after->mtime, (nfstime3{1000000, 5}));
  a.guard = nfstime3{1, 1};
  EXPECT_EQ(client_->call<WccRes>(Proc::SETATTR, a).status, NFS3ERR_NOT_SYNC);
  struct stat st {};
  ASSERT_EQ(::stat((dir_.path() + "/attrs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 4);
}

TEST_F(ServerProcs, LookupDotDotAtRootStaysAtRoot) {
  auto r = client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, ".."});
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(client_->getattr(r.object).fileid, client_->getattr(root_).fileid);
  nfs_fh3 sub = client_->mkdir(root_, "sub");
  auto up = client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{sub, ".."});
  ASSERT_EQ(up.status, NFS3_OK);
  EXPECT_EQ(client_->getattr(up.object).fileid, client_->getattr(root_).fileid);
  EXPECT_EQ(client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, "a/b"}).status, NFS3ERR_ACCES);
  EXPECT_EQ(client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, std::string(256, 'x')}).status,
            NFS3ERR_NAMETOOLONG);
  EXPECT_EQ(client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, "missing"}).status, NFS3ERR_NOENT);
}

TEST_F(ServerProcs, SymlinksAreNeverFollowedOnTheServer) {
  SYMLINK3args s;
  s.where = {root_, "escape"};
  s.symlink_data = "/etc";
  auto r = client_->call<CreateRes>(Proc::SYMLINK, s);
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_TRUE(r.obj_attributes);
  EXPECT_EQ(r.obj_attributes->type, NF3LNK);
  auto rl = client_->call<READLINK3res>(Proc::READLINK, FhArgs{*r.obj});
  ASSERT_EQ(rl.status, NFS3_OK);
  EXPECT_EQ(rl.data, "/etc");
  EXPECT_EQ(client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{*r.obj, "passwd"}).status, NFS3ERR_NOTDIR);
  EXPECT_EQ(client_->call<READ3res>(Proc::READ, READ3args{*r.obj, 0, 10}).status, NFS3ERR_INVAL);
  CREATE3args c;
  c.where = {*r.obj, "x"};
  EXPECT_NE(client_->call<CreateRes>(Proc::CREATE, c).status, NFS3_OK);
}

TEST_F(ServerProcs, RenameOverAnExistingFile) {
  nfs_fh3 a = client_->create(root_, "a");
  client_->write(a, 0, "from a");
  nfs_fh3 b = client_->create(root_, "b");
  client_->write(b, 0, "old b");
  nfs_fh3 d = client_->mkdir(root_, "d");
  auto r = client_->call<RENAME3res>(Proc::RENAME, RENAME3args{{root_, "a"}, {root_, "b"}});
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_TRUE(r.fromdir_wcc.before && r.todir_wcc.after);
  EXPECT_EQ(client_->call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, "a"}).status, NFS3ERR_NOENT);
  EXPECT_EQ(client_->read(client_->lookup(root_, "b"), 0, 100), "from a");
  EXPECT_EQ(client_->call<RENAME3res>(Proc::RENAME, RENAME3args{{root_, "b"}, {d, "moved"}}).status, NFS3_OK);
  EXPECT_EQ(client_->read(client_->lookup(d, "moved"), 0, 100), "from a");
  EXPECT_EQ(client_->call<RENAME3res>(Proc::RENAME, RENAME3args{{root_, "nope"}, {root_, "x"}}).status,
            NFS3ERR_NOENT);
}

TEST_F(ServerProcs, LinkRemoveAndStaleHandles) {
  nfs_fh3 f = client_->create(root_, "orig");
  auto l = client_->call<LINK3res>(Proc::LINK, LINK3args{f, {root_, "alias"}});
  ASSERT_EQ(l.status, NFS3_OK);
  ASSERT_TRUE(l.file_attributes);
  EXPECT_EQ(l.file_attributes->nlink, 2u);
  auto rm = client_->call<WccRes>(Proc::REMOVE, diropargs3{root_, "orig"});
  ASSERT_EQ(rm.status, NFS3_OK);
  EXPECT_EQ(client_->getattr(f).nlink, 1u);
  ASSERT_EQ(client_->call<WccRes>(Proc::REMOVE, diropargs3{root_, "alias"}).status, NFS3_OK);
  EXPECT_EQ(client_->call<GETATTR3res>(Proc::GETATTR, FhArgs{f}).status, NFS3ERR_STALE);
}

TEST_F(ServerProcs, DirectoriesMknodAndRmdir) {
  nfs_fh3 d = client_->mkdir(root_, "dir", 0750);
  EXPECT_EQ(client_->getattr(d).mode, 0750u);
  client_->create(d, "inside");
  EXPECT_EQ(client_->call<WccRes>(Proc::RMDIR, diropargs3{root_, "dir"}).status, NFS3ERR_NOTEMPTY);
  EXPECT_EQ(client_->call<WccRes>(Proc::RMDIR, diropargs3{d, "."}).status, NFS3ERR_INVAL);
  MKNOD3args fifo;
  fifo.where = {root_, "fifo"};
  fifo.type = NF3FIFO;
  fifo.attributes.mode = 0644;
  auto fr = client_->call<CreateRes>(Proc::MKNOD, fifo);
  ASSERT_EQ(fr.status, NFS3_OK);
  EXPECT_EQ(fr.obj_attributes->type, NF3FIFO);
  EXPECT_EQ(client_->call<READ3res>(Proc::READ, READ3args{*fr.obj, 0, 10}).status, NFS3ERR_INVAL);
  MKNOD3args chr;
  chr.where = {root_, "null"};
  chr.type = NF3CHR;
  chr.spec = {1, 3};
  auto cr = client_->call<CreateRes>(Proc::MKNOD, chr);
  ASSERT_EQ(cr.status, NFS3_OK);
  EXPECT_EQ(cr.obj_attributes->rdev.specdata1, 1u);
  EXPECT_EQ(cr.obj_attributes->rdev.specdata2, 3u);
  MKNOD3args reg;
  reg.where = {root_, "reg"};
  reg.type = NF3REG;
  EXPECT_EQ(client_->call<CreateRes>(Proc::MKNOD, reg).status, NFS3ERR_BADTYPE);
  EXPECT_EQ(client_->call<WccRes>(Proc::REMOVE, diropargs3{d, "inside"}).status, NFS3_OK);
  EXPECT_EQ(client_->call<WccRes>(Proc::RMDIR, diropargs3{root_, "dir"}).status, NFS3_OK);
}

TEST_F(ServerProcs, ReaddirCookieContinuationListsEverythingOnce) {
  for (int i = 0; i < 300; ++i) std::ofstream(dir_.path() + "/entry-" + std::to_string(i));
  std::multiset<std::string> seen;
  READDIR3args a{root_, 0, {}, 1024};
  int rounds = 0;
  for (;;) {
    auto r = client_->call<READDIR3res>(Proc::READDIR, a);
    ASSERT_EQ(r.status, NFS3_OK);
    for (const auto& e : r.entries) seen.insert(e.name);
    ++rounds;
    if (r.eof) break;
    ASSERT_FALSE(r.entries.empty());
    a.cookie = r.entries.back().cookie;
    a.cookieverf = r.cookieverf;
  }
  EXPECT_GT(rounds, 5);
  EXPECT_EQ(seen.size(), 302u);
  EXPECT_EQ(seen.count("."), 1u);
  EXPECT_EQ(seen.count("entry-299"), 1u);
  for (const auto& n : seen) EXPECT_EQ(seen.count(n), 1u) << n;
  EXPECT_EQ(client_->call<READDIR3res>(Proc::READDIR, READDIR3args{root_, 0, {}, 64}).status, NFS3ERR_TOOSMALL);
}

TEST_F(ServerProcs, ReaddirplusGivesHandlesAndAttributes) {
  for (int i = 0; i < 100; ++i) std::ofstream(dir_.path() + "/f" + std::to_string(i)) << i;
  std::set<std::string> seen;
  READDIRPLUS3args a{root_, 0, {}, 512, 4096};
  for (;;) {
    auto r = client_->call<READDIRPLUS3res>(Proc::READDIRPLUS, a);
    ASSERT_EQ(r.status, NFS3_OK);
    for (const auto& e : r.entries) {
      seen.insert(e.name);
      ASSERT_TRUE(e.name_attributes) << e.name;
      ASSERT_TRUE(e.name_handle) << e.name;
      EXPECT_EQ(e.name_attributes->fileid, e.fileid);
      if (e.name == "f42") {
        EXPECT_EQ(client_->read(*e.name_handle, 0, 10), "42");
      }
    }
    if (r.eof) break;
    a.cookie = r.entries.back().cookie;
    a.cookieverf = r.cookieverf;
  }
  EXPECT_EQ(seen.size(), 102u);
}

TEST_F(ServerProcs, MountProceduresTrackClients) {
  auto sub = client_->mkdir(root_, "subexport");
  nfs_fh3 via_mount = client_->mount_root(dir_.path() + "/subexport");
  EXPECT_EQ(client_->getattr(via_mount).fileid, client_->getattr(sub).fileid);
  auto missing = client_->mnt("/definitely/not/exported");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, mount3::MNT3ERR_NOENT);
  auto dump = rpc::call_sync(client_->mount(), mount3::kProgram, mount3::kVersion, 2, {}, client_->auth(), 5000);
  ASSERT_TRUE(dump.ok());
  mount3::MountList ml;
  ASSERT_TRUE(xdr::decode(*dump, ml).ok());
  ASSERT_FALSE(ml.entries.empty());
  EXPECT_EQ(ml.entries[0].ml_hostname, "127.0.0.1");
  auto ex = rpc::call_sync(client_->mount(), mount3::kProgram, mount3::kVersion, 5, {}, client_->auth(), 5000);
  ASSERT_TRUE(ex.ok());
  mount3::Exports exports;
  ASSERT_TRUE(xdr::decode(*ex, exports).ok());
  ASSERT_EQ(exports.entries.size(), 1u);
  EXPECT_EQ(exports.entries[0].ex_groups.at(0), "127.0.0.1");
  std::vector<std::uint8_t> path;
  xdr::encode(path, mount3::DirPath{dir_.path()});
  ASSERT_TRUE(rpc::call_sync(client_->mount(), mount3::kProgram, mount3::kVersion, 4, {}, client_->auth(), 5000).ok());
  auto after = rpc::call_sync(client_->mount(), mount3::kProgram, mount3::kVersion, 2, {}, client_->auth(), 5000);
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(xdr::decode(*after, ml).ok());
  EXPECT_TRUE(ml.entries.empty());
}

// 8 connections with 64 WRITEs each in flight at once, then 64 READs each; every
// reply arrives and every byte is where it should be.
TEST_F(ServerProcs, ManyCallsInFlightOnManyConnections) {
  constexpr int kConnections = 8, kDepth = 64, kBlock = 16 * 1024;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<nfs_fh3> files;
  for (int c = 0; c < kConnections; ++c) {
    clients.push_back(std::make_unique<Client>(*server_));
    files.push_back(client_->create(root_, "conc-" + std::to_string(c)));
  }
  auto block = [](int c, int i) { return std::string(kBlock, static_cast<char>('a' + (c * 7 + i) % 26)); };
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0, failures = 0;
  std::vector<std::vector<std::uint8_t>> messages;
  messages.reserve(kConnections * kDepth * 2);
  auto fire = [&](rpc::ClientTransport& t, Proc proc, const std::vector<std::uint8_t>& args, auto check) {
    std::uint32_t xid = rpc::next_xid();
    messages.push_back(make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(proc), args));
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{messages.back()};
    {
      std::lock_guard lk(mu);
      ++outstanding;
    }
    t.call(call, [&, xid, check](Result<xdr::Parts> reply) {
      bool ok = reply.ok();
      if (ok) {
        xdr::Decoder d(*reply);
        ok = rpc::check_reply(d, xid).ok() && check(d);
      }
      std::lock_guard lk(mu);
      if (!ok) ++failures;
      if (--outstanding == 0) cv.notify_all();
    });
  };
  auto wait_all = [&] {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return outstanding == 0; });
  };
  for (int c = 0; c < kConnections; ++c) {
    for (int i = 0; i < kDepth; ++i) {
      std::string data = block(c, i);
      std::vector<std::uint8_t> args;
      xdr::encode(args, WRITE3args{files[c], std::uint64_t{kBlock} * i, kBlock, stable_how::UNSTABLE,
                                   {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}});
      fire(clients[c]->nfs(), Proc::WRITE, args, [](xdr::Decoder& d) {
        WRITE3res r;
        return xdr::decode(d, r).ok() && r.status == NFS3_OK && r.count == kBlock;
      });
    }
  }
  ASSERT_TRUE(wait_all());
  for (int c = 0; c < kConnections; ++c) {
    for (int i = 0; i < kDepth; ++i) {
      std::vector<std::uint8_t> args;
      xdr::encode(args, READ3args{files[c], std::uint64_t{kBlock} * i, kBlock});
      std::string want = block(c, i);
      fire(clients[c]->nfs(), Proc::READ, args, [want](xdr::Decoder& d) {
        READ3res r;
        return xdr::decode(d, r).ok() && r.status == NFS3_OK &&
               std::string(reinterpret_cast<const char*>(r.data.data()), r.data.size()) == want;
      });
    }
  }
  ASSERT_TRUE(wait_all());
  EXPECT_EQ(failures, 0);
}

TEST_F(ServerProcs, GracefulShutdownExitsCleanly) {
  server_->stop();
  EXPECT_TRUE(WIFEXITED(server_->last_status()));
  EXPECT_EQ(WEXITSTATUS(server_->last_status()), 0);
  EXPECT_NE(server_->log().find("stopped"), std::string::npos);
}

// Over TCP as over RDMA, calls that cannot block run on the thread that
// received them (an event loop, --loops of them), not on a worker:
// NULLs and the GETATTRs and READs of a file the server keeps open are
// counted as run inline.
TEST(ServerProcsOverTcp, CallsThatCannotBlockRunOnTheEventLoop) {
  if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
  TempDir dir;
  const std::uint16_t metrics_port = free_port();
  ServerProcess server({dir.path() + " 127.0.0.1(rw,no_root_squash)"},
                       {"--no-rdma", "--loops", "3", "--metrics", "127.0.0.1:" + std::to_string(metrics_port)});
  const auto threads = thread_names(server.pid(), "loop-", 3);
  EXPECT_EQ(threads.count("loop-0") + threads.count("loop-1") + threads.count("loop-2"), 3u);
  Client client(server);
  const nfs_fh3 root = client.mount_root(dir.path());
  const nfs_fh3 f = client.create(root, "data");
  std::vector<std::uint8_t> block(4096, 0x5a);
  ASSERT_EQ(client.call<WRITE3res>(Proc::WRITE, WRITE3args{f, 0, 4096, stable_how::UNSTABLE, block}).status, NFS3_OK);
  const auto inline_ran = [&] {
    return metric(scrape(metrics_port), "nfsrdma_server_inline_calls_total{kind=\"read\",result=\"ran\"}");
  };
  const double before = inline_ran();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(rpc::call_sync(client.nfs(), kProgram, kVersion, 0, {}, client.auth(), 5000).ok());
    ASSERT_EQ(client.call<GETATTR3res>(Proc::GETATTR, FhArgs{f}).status, NFS3_OK);
    ASSERT_EQ(client.call<READ3res>(Proc::READ, READ3args{f, 0, 4096}).status, NFS3_OK);
  }
  EXPECT_GE(inline_ran() - before, 140) << "of 150 NULLs, GETATTRs and READs over TCP, the ones run inline";
}

// An inline WRITE that took long because its thread was preempted (a busy
// machine) sends no WRITEs to the workers, which would only add threads to a
// busy CPU; only one that slept (dirty-page throttling) does. Here the server
// shares one CPU with a thread that runs 3 ms and sleeps 3 ms: each time it
// wakes the scheduler preempts the server's thread for it, often in the
// middle of a WRITE.
TEST(ServerProcsOverTcp, AWriteThatWasPreemptedSendsNoWritesToWorkers) {
  if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs a CPU for the client";
  TempDir dir;
  const std::uint16_t metrics_port = free_port();
  ServerProcess server({dir.path() + " 127.0.0.1(rw,no_root_squash,async)"},
                       {"--no-rdma", "--loops", "1", "--metrics", "127.0.0.1:" + std::to_string(metrics_port)});
  cpu_set_t first{}, rest{};
  CPU_SET(0, &first);
  for (unsigned c = 1; c < std::thread::hardware_concurrency(); ++c) CPU_SET(c, &rest);
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(server.pid()) + "/task")) {
    ASSERT_EQ(::sched_setaffinity(std::stoi(t.path().filename()), sizeof first, &first), 0);
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof rest, &rest), 0);
  std::atomic<bool> hogging{true};
  std::thread hog([&] {
    ::pthread_setaffinity_np(::pthread_self(), sizeof first, &first);
    while (hogging.load(std::memory_order_relaxed)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
      while (std::chrono::steady_clock::now() < until) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  Client client(server);
  const nfs_fh3 root = client.mount_root(dir.path());
  const nfs_fh3 f = client.create(root, "data");
  std::vector<std::uint8_t> block(4096, 0x5a);
  const auto to_workers = [&] {
    return metric(scrape(metrics_port), "nfsrdma_server_inline_calls_total{kind=\"write\",result=\"worker\"}");
  };
  // The first opens the file.
  ASSERT_EQ(client.call<WRITE3res>(Proc::WRITE, WRITE3args{f, 0, 4096, stable_how::UNSTABLE, block}).status, NFS3_OK);
  const double before = to_workers();
  // Four connections on the server's one event loop keep it busy.
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      Client c(server);
      c.mount_root(dir.path());
      for (int i = 0; i < 1000; ++i) {
        const WRITE3args a{f, static_cast<std::uint64_t>(w * 64 + i % 64) * 4096, 4096, stable_how::UNSTABLE, block};
        if (c.call<WRITE3res>(Proc::WRITE, a).status != NFS3_OK) failed.fetch_add(1);
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failed.load(), 0);
  const double sent = to_workers() - before;
  hogging = false;
  hog.join();
  cpu_set_t all{};
  for (unsigned c = 0; c < std::thread::hardware_concurrency(); ++c) CPU_SET(c, &all);
  ::sched_setaffinity(0, sizeof all, &all);
  EXPECT_EQ(sent, 0) << "of 4000 WRITEs over TCP, the ones sent to workers";
}

}  // namespace
}  // namespace nfsrdma::test
