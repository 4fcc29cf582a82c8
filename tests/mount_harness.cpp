#include "tests/mount_harness.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace nfsrdma::test {

namespace {

const char* fuse_binary() {
  const char* bin = std::getenv("NFSRDMA_FUSE");
  if (!bin) throw std::runtime_error("NFSRDMA_FUSE is not set (run through meson test)");
  return bin;
}

bool mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" " + path + " ") != std::string::npos && line.find("fuse.nfsrdma") != std::string::npos) return true;
  }
  return false;
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

MountProcess::MountProcess(const std::string& source, const std::string& options)
    : log_(dir_.path() + "/fuse.log"), source_(source), options_(options) {
  start();
}

void MountProcess::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  ::umount2(mnt_.path().c_str(), MNT_DETACH);
}

int MountProcess::terminate(int sig) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  return reap(std::chrono::seconds(20));
}

int MountProcess::reap(std::chrono::milliseconds patience) {
  int st = 0, status = -1;
  for (auto waited = std::chrono::milliseconds(0); waited < patience; waited += std::chrono::milliseconds(25)) {
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (status == -1) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  return status;
}

bool MountProcess::mounted() const { return test::mounted(mnt_.path()); }

void MountProcess::start() {
  pid_ = spawn({fuse_binary(), "-f", source_, mnt_.path(), "-o", options_}, log_);
  for (int i = 0; i < 400; ++i) {
    if (mounted()) return;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nfsrdma-fuse exited before mounting:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  unmount();
  throw std::runtime_error("nfsrdma-fuse did not mount within 10 s:\n" + log());
}

MountProcess::~MountProcess() { unmount(); }

void MountProcess::unmount() {
  if (pid_ <= 0) {
    if (mounted()) ::umount2(mnt_.path().c_str(), MNT_DETACH);  // left by a process that ended
    return;
  }
  if (::umount2(mnt_.path().c_str(), 0) != 0) ::umount2(mnt_.path().c_str(), MNT_DETACH);
  reap(std::chrono::seconds(5));
}

std::string MountProcess::log() const { return slurp(log_); }

std::string mount_options(const ServerProcess& server, const std::string& proto, const std::string& extra) {
  std::string o = "proto=" + proto + ",provider=tcp,mountport=" + std::to_string(server.mount_port()) + ",port=" +
                  std::to_string(proto == "rdma" ? server.rdma_port() : server.nfs_port());
  return extra.empty() ? o : o + "," + extra;
}

int as_user(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      ::_exit(126);
    }
    ::_exit(fn());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int run_mount_command(const std::vector<std::string>& args, std::string* output) {
  TempDir d;
  std::string log = d.path() + "/out";
  std::vector<std::string> full = {fuse_binary()};
  full.insert(full.end(), args.begin(), args.end());
  pid_t pid = spawn(full, log);
  int st = 0;
  ::waitpid(pid, &st, 0);
  *output = slurp(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace nfsrdma::test
