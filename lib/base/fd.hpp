// Fd: an owning file descriptor, closed when it goes (sockets, epoll,
// eventfd, files: every descriptor the project holds).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace nfsrdma {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A second descriptor for what `fd` refers to, close-on-exec (invalid if
// that fails).
inline Fd dup_fd(int fd) { return Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

// Grows this process's descriptor table to room for `want` descriptors (at
// most the soft RLIMIT_NOFILE) now. Call it before any thread starts: with
// threads sharing the table, Linux waits an RCU grace period each time it
// grows (fcntl(F_DUPFD) of descriptor 256 took 11 ms), stalling whichever
// thread opened the descriptor past its end.
inline void reserve_descriptors(int want) {
  rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const int top = static_cast<int>(std::min<rlim_t>(lim.rlim_cur, static_cast<rlim_t>(want))) - 1;
  Fd any(::open("/", O_PATH | O_CLOEXEC));
  if (top > 2 && any.valid()) Fd(::fcntl(any.get(), F_DUPFD_CLOEXEC, top));  // the first free from `top` on
}

}  // namespace nfsrdma
