#include "lib/rpc/admission.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <thread>

namespace nfsrdma::rpc {
namespace {

Peer from(const char* ip) {
  Peer p;
  auto* a = reinterpret_cast<sockaddr_in*>(&p.addr);
  a->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a->sin_addr);
  p.len = sizeof *a;
  return p;
}

TEST(Admission, PerAddressLimitRefusesOnlyThatAddress) {
  Admission a("test", {.max_connections = 100, .max_per_address = 2, .idle_timeout = {}});
  auto t1 = a.admit(from("10.0.0.1")), t2 = a.admit(from("10.0.0.1"));
  ASSERT_TRUE(t1.ticket && t2.ticket);
  EXPECT_FALSE(a.admit(from("10.0.0.1")).ticket);
  EXPECT_TRUE(a.admit(from("10.0.0.2")).ticket);
  a.remove(*t1.ticket);
  EXPECT_TRUE(a.admit(from("10.0.0.1")).ticket) << "a closed connection still counted";
}

TEST(Admission, UnknownAddressesAreNotLumpedTogether) {
  Admission a("test", {.max_connections = 100, .max_per_address = 1, .idle_timeout = {}});
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(a.admit(Peer{}).ticket);
}

TEST(Admission, AtTheLimitTheLongestIdleIsEvicted) {
  Admission a("test", {.max_connections = 3, .max_per_address = 10, .idle_timeout = {}});
  auto first = a.admit(from("10.0.0.1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto second = a.admit(from("10.0.0.1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto third = a.admit(from("10.0.0.2"));
  first.ticket->touch();  // now second is the longest idle
  auto fourth = a.admit(from("10.0.0.3"));
  ASSERT_TRUE(fourth.ticket);
  ASSERT_TRUE(fourth.evict);
  EXPECT_EQ(*fourth.evict, second.ticket->id());
  EXPECT_EQ(a.size(), 3u);
}

// 1,100 connections from 18 addresses reconnecting as fast as they were
// evicted closed a quiet client's only connection within seconds; eviction
// now takes from the addresses holding the most.
TEST(Admission, EvictionTakesFromTheBusiestAddressNotAQuietClient) {
  Admission a("test", {.max_connections = 40, .max_per_address = 64, .idle_timeout = {}});
  auto quiet = a.admit(from("10.0.0.100"));  // the longest idle of all
  ASSERT_TRUE(quiet.ticket);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::vector<std::shared_ptr<Admission::Ticket>> held;
  for (int round = 0; round < 2000; ++round) {
    const std::string ip = "10.0.1." + std::to_string(round % 18);
    auto d = a.admit(from(ip.c_str()));
    ASSERT_TRUE(d.ticket);
    held.push_back(d.ticket);
    ASSERT_NE(d.evict, std::optional<std::uint64_t>(quiet.ticket->id())) << "after " << round << " reconnects";
  }
  EXPECT_EQ(a.size(), 40u);
}

TEST(Admission, IdleConnectionsExpire) {
  Admission a("test", {.max_connections = 10, .max_per_address = 10, .idle_timeout = std::chrono::milliseconds(50)});
  auto quiet = a.admit(from("10.0.0.1")), busy = a.admit(from("10.0.0.1"));
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    busy.ticket->touch();
  }
  auto gone = a.expired();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], quiet.ticket->id());
  EXPECT_EQ(a.size(), 1u);
}

}  // namespace
}  // namespace nfsrdma::rpc
