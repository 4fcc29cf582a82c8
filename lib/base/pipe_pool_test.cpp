#include "lib/base/pipe_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace nfsrdma {
namespace {

TEST(PipePool, LendsAtMostItsPipesAndTakesBackTheEmptyOnes) {
  PipePool pool(2, 1 << 20);
  ASSERT_GE(pool.capacity(), 64u * 1024);
  PipePool::Pipe a = pool.take(), b = pool.take();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(pool.take()) << "both lent: the caller copies";
  EXPECT_EQ(::fcntl(a.write_end(), F_GETPIPE_SZ), static_cast<int>(pool.capacity()));
  const int kept = a.read_end();
  a = PipePool::Pipe();  // empty: back in the pool
  EXPECT_EQ(pool.lent(), 1u);
  PipePool::Pipe c = pool.take();
  EXPECT_EQ(c.read_end(), kept) << "the returned pipe is lent again";
}

TEST(PipePool, APipeReturnedWithDataInItIsClosed) {
  PipePool pool(1, 64 * 1024);
  PipePool::Pipe p = pool.take();
  ASSERT_TRUE(p);
  ASSERT_EQ(::write(p.write_end(), "abc", 3), 3);
  p.filled(3);
  const int r = p.read_end();
  p = PipePool::Pipe();
  EXPECT_EQ(pool.lent(), 0u);
  EXPECT_EQ(::fcntl(r, F_GETFD), -1) << "closed, not kept with stale data";
  PipePool::Pipe q = pool.take();
  ASSERT_TRUE(q);
  char buf[4];
  EXPECT_EQ(::read(q.read_end(), buf, sizeof buf), -1) << "a new pipe, empty";
}

}  // namespace
}  // namespace nfsrdma
