// SIGHUP re-reads the exports file while clients stay connected: changed
// options apply to the next call, new exports can be mounted, withdrawn ones
// answer STALE (and come back with the same handles), and a file that cannot
// be served changes nothing.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/server_harness.hpp"

namespace nfsrdma::test {
namespace {

using namespace nfs3;

class ServerReload : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"/a", "/b"}) std::filesystem::create_directory(dir_.path() + d);
    write_exports(a() + " 127.0.0.1(rw,no_root_squash,insecure)\n");
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{},
                                              std::vector<std::string>{"--exports", file()});
  }
  std::string a() const { return dir_.path() + "/a"; }
  std::string b() const { return dir_.path() + "/b"; }
  std::string file() const { return dir_.path() + "/exports"; }
  void write_exports(const std::string& text) { std::ofstream(file()) << text; }

  // SIGHUP, then waits for the server to log the outcome (the n-th one).
  void reload(int n) {
    ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0);
    for (int i = 0; i < 100; ++i) {
      std::string log = server_->log();
      std::size_t seen = 0;
      for (std::size_t at = 0; (at = log.find("SIGHUP: exports", at)) != std::string::npos; ++at) ++seen;
      if (seen >= static_cast<std::size_t>(n)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "no reload logged:\n" << server_->log();
  }
  nfsstat3 create(Client& c, const nfs_fh3& dir, const std::string& name) {
    CREATE3args args{{dir, name}, createmode3::UNCHECKED, {}, {}};
    return c.call<CreateRes>(Proc::CREATE, args).status;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerReload, ChangesApplyToConnectedClientsWithoutDroppingThem) {
  Client c(*server_);
  nfs_fh3 root = c.mount_root(a());
  ASSERT_EQ(create(c, root, "one"), NFS3_OK);
  EXPECT_FALSE(c.mnt(b())->status == mount3::MNT3_OK);

  write_exports(a() + " 127.0.0.1(ro,no_root_squash,insecure)\n" + b() + " 127.0.0.1(rw,insecure)\n");
  reload(1);
  EXPECT_NE(server_->log().find("1 kept, 1 added, 0 withdrawn"), std::string::npos) << server_->log();
  // Same connection, same handle: now read-only.
  EXPECT_EQ(create(c, root, "two"), NFS3ERR_ROFS);
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{root}).status, NFS3_OK);
  EXPECT_EQ(c.mnt(b())->status, mount3::MNT3_OK);

  write_exports(b() + " 127.0.0.1(rw,insecure)\n");
  reload(2);
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{root}).status, NFS3ERR_STALE);
  EXPECT_NE(c.mnt(a())->status, mount3::MNT3_OK);

  write_exports(a() + " 127.0.0.1(rw,no_root_squash,insecure)\n" + b() + " 127.0.0.1(rw,insecure)\n");
  reload(3);
  EXPECT_EQ(c.call<GETATTR3res>(Proc::GETATTR, FhArgs{root}).status, NFS3_OK) << "back, same handles";
  EXPECT_EQ(create(c, root, "three"), NFS3_OK);
}

TEST_F(ServerReload, ASpaceBeforeOptionsIsWarnedAboutAtEveryReload) {
  auto warnings = [&] {
    std::string log = server_->log();
    std::size_t seen = 0;
    for (std::size_t at = 0; (at = log.find("apply to everyone", at)) != std::string::npos; ++at) ++seen;
    return seen;
  };
  EXPECT_EQ(warnings(), 0u);
  EXPECT_NE(server_->log().find("127.0.0.1(rw,no_root_squash,sync,insecure)"), std::string::npos) << server_->log();
  write_exports(a() + " 127.0.0.1 (rw,insecure)\n");
  reload(1);
  EXPECT_EQ(warnings(), 1u) << server_->log();
  reload(2);
  EXPECT_EQ(warnings(), 2u) << server_->log();
  // What it means, as exportfs reads it: everyone, read-write.
  EXPECT_NE(server_->log().find("*(rw,root_squash,sync,insecure"), std::string::npos) << server_->log();
}

TEST_F(ServerReload, AFileThatCannotBeServedChangesNothing) {
  Client c(*server_);
  nfs_fh3 root = c.mount_root(a());
  for (const std::string& bad : {a() + " 127.0.0.1(rw,frobnicate)\n",                      // parse error
                                 dir_.path() + "/missing 127.0.0.1(rw,insecure)\n",         // no directory
                                 a() + " 127.0.0.1(rw,insecure,fsid=7)\n",                  // fsid changed
                                 a() + " 127.0.0.1(rw)\n" + a() + "/ 127.0.0.1(ro)\n",    // twice
                                 std::string("# emptied by mistake\n"), std::string()}) {  // no export at all
    write_exports(bad);
    static int n = 0;
    reload(++n);
    EXPECT_EQ(create(c, root, "still-" + std::to_string(n)), NFS3_OK) << bad;
    EXPECT_EQ(c.mnt(a())->status, mount3::MNT3_OK) << bad;
  }
  std::string log = server_->log();
  EXPECT_NE(log.find("exports unchanged"), std::string::npos);
  EXPECT_EQ(log.find("exports reloaded"), std::string::npos) << log;
}

// As nfsd with an empty /etc/exports: it starts, serves nothing, and a reload adds.
TEST_F(ServerReload, AnEmptyFileServesNothingUntilAReloadAddsExports) {
  write_exports("# nothing yet\n");
  server_ = std::make_unique<ServerProcess>(std::vector<std::string>{}, std::vector<std::string>{"--exports", file()});
  Client c(*server_);
  EXPECT_NE(c.mnt(a())->status, mount3::MNT3_OK);
  EXPECT_NE(server_->log().find("nothing exported yet"), std::string::npos);
  write_exports(a() + " 127.0.0.1(rw,insecure)\n");
  reload(1);
  EXPECT_EQ(c.mnt(a())->status, mount3::MNT3_OK);
}

}  // namespace
}  // namespace nfsrdma::test
