#include "lib/base/heap.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <chrono>
#include <vector>

namespace nfsrdma {
namespace {

TEST(HeapKeeper, StopsAtOnceWhateverItsInterval) {
  auto start = std::chrono::steady_clock::now();
  { HeapKeeper heap(std::chrono::hours(1)); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(HeapKeeper, KeepsMegabyteBuffersInTheHeap) {
  HeapKeeper heap(std::chrono::hours(1));
  auto before = mallinfo2().hblks;
  std::vector<char*> buffers;
  for (int i = 0; i < 8; ++i) buffers.push_back(static_cast<char*>(::malloc(1 << 20)));
  EXPECT_EQ(mallinfo2().hblks, before);  // none of them mapped on its own
  for (auto* b : buffers) ::free(b);
}

}  // namespace
}  // namespace nfsrdma
