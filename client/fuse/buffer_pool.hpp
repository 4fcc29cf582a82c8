// A pool of equal chunks in one mapping, registered once with the NFS client
// so RPC-RDMA moves data in and out of it in place (DESIGN.md "The data path").
// acquire() waits when every chunk is out: running out is a wait, not an error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "lib/base/mapping.hpp"

namespace nfsrdma::fuse {

class BufferPool {
 public:
  BufferPool(std::size_t chunk_bytes, std::size_t chunks);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  std::span<std::uint8_t> region() { return {base_, chunk_ * count_}; }
  std::size_t chunk_bytes() const { return chunk_; }

  // A free chunk; when none is free, runs `starved` once (without the lock)
  // and waits for a release.
  std::uint8_t* acquire(const std::function<void()>& starved = {});
  void release(std::uint8_t* chunk);
  // True when fewer than a quarter of the chunks are free.
  bool running_low();

 private:
  std::size_t chunk_, count_;
  Mapping memory_;
  std::uint8_t* base_;
  std::mutex mu_;  // guards free_
  std::condition_variable cv_;
  std::vector<std::uint8_t*> free_;
};

}  // namespace nfsrdma::fuse
