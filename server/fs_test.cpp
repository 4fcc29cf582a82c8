// errno_to_nfsstat3: a deliberate status for what the server meets, and no
// log line a client can repeat at will.
#include "server/fs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>

#include "lib/base/log.hpp"

namespace nfsrdma::server {
namespace {

using namespace nfs3;

// A borrowed descriptor stays open while the call holds it, even once its
// cache entry is gone; an owned one is the call's to give away, once.
TEST(ObjectFd, ABorrowedDescriptorIsPinnedAndNeverClosedByTheCall) {
  auto entry = std::make_shared<Fd>(::open("/", O_PATH | O_CLOEXEC));
  ASSERT_TRUE(entry->valid());
  const int fd = entry->get();
  {
    ObjectFd borrowed;
    borrowed.borrow(entry, fd);
    entry.reset();  // the cache forgot it: the pin keeps it open
    EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC);
    EXPECT_FALSE(borrowed.owned());
    EXPECT_FALSE(borrowed.release().valid()) << "a borrowed descriptor is not the call's to give";
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "closed once the last holder let go";
}

TEST(ObjectFd, AnOwnedDescriptorIsReleasedOnceAndClosedOtherwise) {
  ObjectFd own(Fd(::open("/", O_PATH | O_CLOEXEC)));
  ASSERT_TRUE(own.owned());
  const int fd = own.get();
  Fd given = own.release();
  EXPECT_EQ(given.get(), fd);
  EXPECT_FALSE(own.valid());
  {
    ObjectFd again(std::move(given));
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
}

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
