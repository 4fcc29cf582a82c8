// The heap policy of the long-running processes (server and FUSE client).
// Buffers of up to 1 MiB come and go by the thousand a second (calls, TCP
// records, FUSE requests): they are kept in the heap for the next one rather
// than mapped fresh and zeroed by the kernel each time. glibc then returns
// freed memory to the system only from the top of each thread's arena, so
// arenas keep what a burst once needed and resident memory shows that
// high-water mark rather than what is in use; a thread hands back what stays
// free every few seconds.
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
