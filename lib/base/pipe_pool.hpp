// PipePool: pipes that carry file data from the page cache to a socket
// without a copy. The thread that runs a READ splices the file into a pipe
// (page references, not bytes; it may wait for the disk there), and whoever
// sends the reply splices the pipe into the socket, which never waits for
// the disk: the pages are in the pipe already. A pipe comes back to the pool
// empty; one that still holds data (its reply was never sent) is closed.
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/base/fd.hpp"

namespace nfsrdma {

class PipePool {
 public:
  // A pipe lent by the pool, returned when it goes.
  class Pipe {
   public:
    Pipe() = default;
    Pipe(Pipe&& o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)), read_(std::move(o.read_)), write_(std::move(o.write_)),
          held_(std::exchange(o.held_, 0)) {}
    Pipe& operator=(Pipe&& o) noexcept {
      if (this != &o) {
        give_back();
        pool_ = std::exchange(o.pool_, nullptr);
        read_ = std::move(o.read_);
        write_ = std::move(o.write_);
        held_ = std::exchange(o.held_, 0);
      }
      return *this;
    }
    ~Pipe() { give_back(); }
    explicit operator bool() const { return read_.valid(); }
    int read_end() const { return read_.get(); }
    int write_end() const { return write_.get(); }
    // What it holds: the writer adds what it spliced in, the reader takes
    // away what it spliced out.
    std::size_t held() const { return held_; }
    void filled(std::size_t n) { held_ += n; }
    void drained(std::size_t n) { held_ -= n; }

   private:
    friend class PipePool;
    void give_back();
    PipePool* pool_ = nullptr;
    Fd read_, write_;
    std::size_t held_ = 0;
  };

  // At most `max_pipes` lent at once, each of `capacity` bytes or the most
  // the kernel gives below it (F_SETPIPE_SZ; capacity() says what it gave).
  // A pipe holds capacity() / 4096 pages, whatever their fill: a splice
  // from the page cache takes one slot per page it touches.
  PipePool(std::size_t max_pipes, std::size_t capacity);
  PipePool(const PipePool&) = delete;
  PipePool& operator=(const PipePool&) = delete;

  // A pipe, or none when all are lent or a new one cannot be made: the
  // caller copies instead. Thread-safe.
  Pipe take();
  // What a pipe holds at most (0: the kernel refused pipes).
  std::size_t capacity() const { return capacity_; }
  std::size_t lent();

 private:
  std::mutex mu_;
  std::vector<std::pair<Fd, Fd>> idle_;
  std::size_t lent_ = 0;
  const std::size_t max_pipes_;
  std::size_t capacity_ = 0;
};

}  // namespace nfsrdma
