// errno_to_nfsstat3: a deliberate status for what the server meets, and no
// log line a client can repeat at will.
#include "server/fs.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "lib/base/log.hpp"

namespace nfsrdma::server {
namespace {

using namespace nfs3;

TEST(ErrnoToNfsstat3, WhatALaterTryMayCureIsJukebox) {
  // ENOMEM: open_by_handle_at racing a rename on another connection.
  EXPECT_EQ(errno_to_nfsstat3(ENOMEM), NFS3ERR_JUKEBOX);
  EXPECT_EQ(errno_to_nfsstat3(EAGAIN), NFS3ERR_JUKEBOX);
  EXPECT_EQ(errno_to_nfsstat3(EINTR), NFS3ERR_JUKEBOX);
  EXPECT_EQ(errno_to_nfsstat3(EMFILE), NFS3ERR_JUKEBOX);
}

TEST(ErrnoToNfsstat3, EveryOtherDeliberately) {
  EXPECT_EQ(errno_to_nfsstat3(EIO), NFS3ERR_IO);
  EXPECT_EQ(errno_to_nfsstat3(ESTALE), NFS3ERR_STALE);
  EXPECT_EQ(errno_to_nfsstat3(ENOSYS), NFS3ERR_NOTSUPP);
  EXPECT_EQ(errno_to_nfsstat3(EBUSY), NFS3ERR_ACCES);
  EXPECT_EQ(errno_to_nfsstat3(EOVERFLOW), NFS3ERR_INVAL);
  EXPECT_EQ(errno_to_nfsstat3(E2BIG), NFS3ERR_FBIG);
}

// An errno no one expected is IO, and its warning goes through the limiter:
// a thousand of them make one line.
TEST(ErrnoToNfsstat3, TheUnexpectedIsLoggedAtMostOncePerInterval) {
  char path[] = "/tmp/nfsrdma-fs-log-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  ASSERT_TRUE(init_logging("info"));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(errno_to_nfsstat3(ENOTSOCK), NFS3ERR_IO);
  spdlog::default_logger()->flush();
  ::dup2(saved, 2);
  ::close(saved);
  std::FILE* f = std::fopen(path, "r");
  ASSERT_NE(f, nullptr);
  std::size_t lines = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
  std::fclose(f);
  ::close(fd);
  ::unlink(path);
  EXPECT_EQ(lines, 1u);
}

}  // namespace
}  // namespace nfsrdma::server
