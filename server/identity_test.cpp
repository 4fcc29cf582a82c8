#include "server/identity.hpp"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace nfsrdma::server {
namespace {

std::uint32_t fsuid() { return static_cast<std::uint32_t>(syscall(SYS_setfsuid, -1)); }
std::uint32_t fsgid() { return static_cast<std::uint32_t>(syscall(SYS_setfsgid, -1)); }

// Capabilities are per thread: raises or lowers `cap` in this thread's
// effective set only (it stays permitted, so it can come back).
void set_effective(int cap, bool on) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  ASSERT_EQ(syscall(SYS_capget, &h, d), 0);
  auto& word = d[cap / 32].effective;
  word = on ? word | (1u << (cap % 32)) : word & ~(1u << (cap % 32));
  ASSERT_EQ(syscall(SYS_capset, &h, d), 0);
}

Credentials user(std::uint32_t id) {
  Credentials c;
  c.uid = c.gid = id;
  c.ngroups = 1;
  c.groups[0] = id + 1;
  return c;
}

void in_thread(void (*body)()) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (capabilities to drop)";
  std::thread(body).join();
}

TEST(Identity, SwitchesAndReturns) {
  in_thread([] {
    ASSERT_TRUE(become(user(4242)));
    EXPECT_EQ(fsuid(), 4242u);
    EXPECT_EQ(fsgid(), 4242u);
    ASSERT_TRUE(become_root());
    EXPECT_EQ(fsuid(), 0u);
    EXPECT_EQ(fsgid(), 0u);
  });
}

TEST(Identity, AFailedSetgroupsFailsTheSwitch) {
  in_thread([] {
    set_effective(CAP_SETGID, false);
    EXPECT_FALSE(become(user(4242)));
    EXPECT_EQ(fsuid(), 0u) << "went on after a failed setgroups";
    set_effective(CAP_SETGID, true);
  });
}

TEST(Identity, AFailedSetfsuidFailsTheSwitchAndTheNextCallStartsOver) {
  in_thread([] {
    set_effective(CAP_SETUID, false);
    EXPECT_FALSE(become(user(4242)));
    EXPECT_EQ(fsuid(), 0u);
    set_effective(CAP_SETUID, true);
    // The same identity again: not taken for the current one, every call redone.
    ASSERT_TRUE(become(user(4242)));
    EXPECT_EQ(fsuid(), 4242u);
    ASSERT_TRUE(become_root());
  });
}

TEST(Identity, AFailedReturnToRootIsReported) {
  in_thread([] {
    ASSERT_TRUE(become(user(4242)));
    // Going back needs setgroups too, hence CAP_SETGID.
    set_effective(CAP_SETGID, false);
    EXPECT_FALSE(become_root());
    set_effective(CAP_SETGID, true);
    ASSERT_TRUE(become_root());
    EXPECT_EQ(fsuid(), 0u);
  });
}

}  // namespace
}  // namespace nfsrdma::server
