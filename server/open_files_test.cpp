#include "server/open_files.hpp"

#include <fcntl.h>

#include <gtest/gtest.h>

#include <thread>

namespace nfsrdma::server {
namespace {

nfs3::nfs_fh3 fh(std::uint8_t tag) {
  nfs3::nfs_fh3 h;
  h.len = 24;
  h.data.fill(7);
  h.data[23] = tag;
  return h;
}
OpenFiles::File file() { return {1, Fd(::open("/", O_PATH | O_CLOEXEC)), Fd(::open("/", O_RDONLY | O_CLOEXEC))}; }

TEST(OpenFiles, KeepsReadersAndWritersApartAndForgetsBoth) {
  OpenFiles files(8, std::chrono::seconds(60));
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::read), nullptr);
  auto r = files.put(fh(1), OpenFiles::Use::read, file());
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::read), r);
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::write), nullptr);
  auto w = files.put(fh(1), OpenFiles::Use::write, file());
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::write), w);
  EXPECT_EQ(files.get(fh(2), OpenFiles::Use::read), nullptr);
  EXPECT_EQ(files.size(), 2u);
  files.forget(fh(1));
  EXPECT_EQ(files.size(), 0u);
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::read), nullptr);
  // A call still using an entry keeps its descriptor open.
  EXPECT_GE(::fcntl(r->io.get(), F_GETFD), 0);
}

TEST(OpenFiles, ClosesTheLeastRecentlyUsedPastCapacity) {
  OpenFiles files(3, std::chrono::seconds(60));
  for (std::uint8_t i = 0; i < 3; ++i) files.put(fh(i), OpenFiles::Use::read, file());
  ASSERT_NE(files.get(fh(0), OpenFiles::Use::read), nullptr);  // 1 is now the least recent
  files.put(fh(3), OpenFiles::Use::read, file());
  EXPECT_EQ(files.size(), 3u);
  EXPECT_EQ(files.get(fh(1), OpenFiles::Use::read), nullptr);
  for (std::uint8_t i : {0, 2, 3}) EXPECT_NE(files.get(fh(i), OpenFiles::Use::read), nullptr) << int(i);
  files.put(fh(3), OpenFiles::Use::read, file());  // replacing is not growing
  EXPECT_EQ(files.size(), 3u);
}

TEST(OpenFiles, ClosesWhatWasIdle) {
  OpenFiles files(8, std::chrono::milliseconds(100));
  files.put(fh(1), OpenFiles::Use::read, file());
  files.put(fh(2), OpenFiles::Use::write, file());
  for (int i = 0; i < 200 && files.size() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(files.size(), 0u);
}

}  // namespace
}  // namespace nfsrdma::server
