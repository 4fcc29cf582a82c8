// The fixture the FUSE mount suites share: a server exporting a temporary
// directory and nfsrdma-fuse mounting it, over rdma (tcp provider) or tcp.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "tests/mount_harness.hpp"

namespace nfsrdma::test {

class FuseMount : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting needs root";
    if (::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/fuse";
    export_ = dir_.path() + "/export";
    std::filesystem::create_directory(export_);
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{export_ + " 127.0.0.1(rw,no_root_squash)"},
                                              server_extra());
    remount();
  }
  // More arguments for the server, for suites that need them.
  virtual std::vector<std::string> server_extra() const { return {}; }
  void TearDown() override {
    std::string log = mount_ ? mount_->log() : "";
    if (mount_) mount_->unmount();
    if (HasFailure()) {
      std::cerr << "nfsrdma-fuse log:\n" << log << "\nserver log (tail):\n" << tail(server_ ? server_->log() : "");
    }
    for (const char* bad : {"critical", "Sanitizer", "runtime error"}) {
      EXPECT_EQ(log.find(bad), std::string::npos) << "nfsrdma-fuse logged '" << bad << "'";
    }
  }
  void remount(const std::string& extra = "") {
    mount_.reset();
    mount_ = std::make_unique<MountProcess>("127.0.0.1:" + export_, mount_options(*server_, GetParam(), extra));
  }
  static std::string tail(const std::string& s) { return s.size() > 4000 ? s.substr(s.size() - 4000) : s; }
  std::string m(const std::string& name) const { return *mount_ / name; }
  std::string e(const std::string& name) const { return export_ + "/" + name; }
  static struct stat st(const std::string& path) {
    struct stat s {};
    EXPECT_EQ(::lstat(path.c_str(), &s), 0) << path << ": " << std::strerror(errno);
    return s;
  }
  static void put(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
  }
  static std::string get(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  TempDir dir_;
  std::string export_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<MountProcess> mount_;
};

inline std::string transport_name(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

}  // namespace nfsrdma::test
