// Test harness for real FUSE mounts: runs nfsrdma-fuse in the foreground on
// a fresh mount point, waits until the kernel has the mount, and always
// unmounts. A log with critical lines or sanitizer reports fails the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tests/server_harness.hpp"

namespace nfsrdma::test {

class MountProcess {
 public:
  // `options` is the -o list, e.g. "proto=rdma,port=N,mountport=M,provider=tcp".
  MountProcess(const std::string& source, const std::string& options);
  ~MountProcess();

  const std::string& path() const { return mnt_.path(); }
  std::string operator/(const std::string& name) const { return mnt_.path() + "/" + name; }
  std::string log() const;
  void unmount();
  // SIGKILL, and the mount detached; start() mounts again on the same path.
  void kill_hard();
  // Sends `sig` and waits up to 20 s for the process to end: its exit
  // status, 128 + the signal that killed it, or -1 if it had to be killed.
  // A mount it left stays until unmount(); start() mounts again.
  int terminate(int sig);
  bool mounted() const;
  void start();

 private:
  TempDir dir_, mnt_;
  std::string log_;
  std::string source_, options_;
  pid_t pid_ = -1;
  // Waits up to `patience` for the process to end, then SIGKILLs it: its
  // exit status, 128 + the signal that ended it, or -1 if it was killed here.
  int reap(std::chrono::milliseconds patience);
};

// The -o list that reaches `server` over `proto` ("rdma" or "tcp").
std::string mount_options(const ServerProcess& server, const std::string& proto, const std::string& extra = "");

// Runs `fn` in a child process as uid/gid with `groups`; returns what fn
// returned (an errno, or 0), or -1 if the child died.
int as_user(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const std::function<int()>& fn);

// Runs nfsrdma-fuse to completion (for mount errors): its exit status and output.
int run_mount_command(const std::vector<std::string>& args, std::string* output);

}  // namespace nfsrdma::test
