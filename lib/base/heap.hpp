// The heap policy of the long-running processes (server and FUSE client).
// Buffers of up to 1 MiB come and go by the thousand a second (calls, TCP
// records): they are kept in the heap for the next one rather than mapped
// fresh and zeroed by the kernel each time. Freed memory stays with the
// thread arena it came from, so every 5 s a thread hands the free pages back
// (malloc_trim). That does not shrink a thread arena's top, which is kept up
// to M_TRIM_THRESHOLD: big buffers must not be allocated by threads that come
// and go (see nfsrdma-fuse's workers), or each arena keeps its high-water mark.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace nfsrdma {

class HeapKeeper {
 public:
  // Sets the policy; the trimming thread blocks every signal.
  explicit HeapKeeper(std::chrono::milliseconds trim_every = std::chrono::seconds(5));
  ~HeapKeeper();
  HeapKeeper(const HeapKeeper&) = delete;
  HeapKeeper& operator=(const HeapKeeper&) = delete;

 private:
  std::mutex mu_;  // guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread trimmer_;
};

}  // namespace nfsrdma
