// lib/fabric over the tcp provider on loopback: connect/accept with private
// data, sends and receives, and RMA Write/Read addressed as FI_MR_BASIC
// segments (virtual address + 32-bit key), checked byte for byte; a Send
// posted behind an unsignalled Write arrives after the Write's data and is
// the only completion of the two.
#include "lib/fabric/fabric.hpp"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <signal.h>

#include <future>
#include <thread>

namespace nfsrdma::fabric {
namespace {

std::size_t drain(Endpoint& ep, std::size_t want, std::vector<Completion>& got) {
  for (int i = 0; i < 100 && got.size() < want; ++i) {
    Completion c[8];
    auto n = ep.poll(c, 100);
    EXPECT_TRUE(n.ok());
    if (!n) break;
    for (std::size_t k = 0; k < *n; ++k) got.push_back(c[k]);
  }
  return got.size();
}

// Whose failure a refused post is: the connection's (the call goes again on
// a new one), a full queue's, or the request's own (it would fail anywhere).
TEST(Fabric, APostRefusedForTheConnectionsStateIsTheConnectionsFailure) {
  EXPECT_TRUE(post_result(0, "fi_sendmsg").ok());
  for (long rc : std::initializer_list<long>{-FI_ENOTCONN, -FI_ECONNRESET, -FI_ECONNABORTED, -EPIPE, -FI_ESHUTDOWN,
                                             -FI_EOPBADSTATE}) {
    auto r = post_result(rc, "fi_sendmsg");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().action, Action::reconnect) << r.error().describe();
  }
  EXPECT_EQ(post_result(-FI_EAGAIN, "fi_sendmsg").error().action, Action::retry_now);
  for (long rc : std::initializer_list<long>{-FI_EINVAL, -FI_EMSGSIZE, -FI_ENOSYS}) {
    auto r = post_result(rc, "fi_sendmsg");
    EXPECT_EQ(r.error().action, Action::fail) << r.error().describe();
    EXPECT_NE(r.error().message.find("fi_sendmsg"), std::string::npos);
  }
}

void handler(int, siginfo_t*, void*) {}
sighandler_t disposition(int sig) {
  struct sigaction now {};
  ::sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

// What libinfinipath's constructor does at load (SA_SIGINFO handlers on six
// signals), undone; an ignored signal and one outside the six are left.
TEST(Fabric, HandlersALibraryInstalledAtLoadGoBackToTheDefault) {
  struct sigaction hook {};
  hook.sa_sigaction = handler;
  hook.sa_flags = SA_SIGINFO;
  struct sigaction old_term {}, old_abrt {}, old_int {}, old_hup {};
  ::sigaction(SIGTERM, &hook, &old_term);
  ::sigaction(SIGABRT, &hook, &old_abrt);
  ::sigaction(SIGHUP, &hook, &old_hup);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);

  restore_default_signals();
  EXPECT_EQ(disposition(SIGTERM), SIG_DFL);
  EXPECT_EQ(disposition(SIGABRT), SIG_DFL);
  EXPECT_EQ(disposition(SIGINT), SIG_IGN);
  EXPECT_NE(disposition(SIGHUP), SIG_DFL);

  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGABRT, &old_abrt, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
}

TEST(Fabric, UnknownProviderIsRefusedClearly) {
  auto p = choose_provider("infiniband-please");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("use tcp, verbs or sockets"), std::string::npos);
  auto d = choose_provider("");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d == "tcp" || *d == "verbs");
}

TEST(Fabric, ConnectSendAndRmaOverTcp) {
  auto listener = Listener::listen("tcp", "127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.error().describe();
  std::uint16_t port = (*listener)->port();
  ASSERT_NE(port, 0);

  // The server's buffer the client will write and read remotely.
  std::vector<std::uint8_t> target(1 << 20, 0);
  std::unique_ptr<Endpoint> server_ep;
  std::vector<std::uint8_t> server_saw_private;
  OpContext server_recv_ctx{};
  std::uint8_t server_inbox[64] = {};
  constexpr std::size_t kChainedAt = 4096 + 256 * 1024, kChained = 64 * 1024;
  std::vector<std::uint8_t> chained_seen;  // the unsignalled Write's target, as the Send arrived
  MemoryRegion target_mr, inbox_mr;
  std::promise<std::pair<std::uint64_t, std::uint32_t>> segment;  // where the client may write
  auto segment_ready = segment.get_future();
  std::thread server([&] {
    auto req = (*listener)->wait_request(5000);
    ASSERT_TRUE(req.ok() && *req);
    server_saw_private = (*req)->private_data;
    auto domain = (*listener)->domain_for(**req);
    ASSERT_TRUE(domain.ok()) << domain.error().describe();
    // Each accepted connection is used by one thread at a time (rdma::ProgressLoop).
    EXPECT_EQ((*domain)->info()->domain_attr->threading, FI_THREAD_COMPLETION);
    EXPECT_EQ((*req)->info->domain_attr->threading, FI_THREAD_COMPLETION);
    auto tmr = (*domain)->register_memory(target.data(), target.size(), true);
    ASSERT_TRUE(tmr.ok()) << tmr.error().describe();
    target_mr = std::move(*tmr);
    auto imr = (*domain)->register_memory(server_inbox, sizeof server_inbox, false);
    ASSERT_TRUE(imr.ok());
    inbox_mr = std::move(*imr);
    segment.set_value({target_mr.remote_address(target.data() + 4096), target_mr.key()});
    const std::uint8_t reply[] = {9, 8, 7};
    auto ep = Endpoint::accept(**domain, (*req)->info.get(), reply, 5000, 16, [&](Endpoint& e) {
      return e.post_recv(&server_recv_ctx, server_inbox, sizeof server_inbox, inbox_mr.desc());
    });
    ASSERT_TRUE(ep.ok()) << ep.error().describe();
    server_ep = std::move(*ep);
    // Keep the completion queue moving while the client does RMA on us.
    std::vector<Completion> got;
    drain(*server_ep, 1, got);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].context, &server_recv_ctx);
    EXPECT_EQ(got[0].len, 5u);
    chained_seen.assign(target.begin() + kChainedAt, target.begin() + kChainedAt + kChained);
  });

  auto info = get_info("tcp", "127.0.0.1", std::to_string(port), false);
  ASSERT_TRUE(info.ok());
  auto domain = Domain::open(info->get());
  ASSERT_TRUE(domain.ok());
  std::vector<std::uint8_t> peer_private;
  const std::uint8_t hello[] = {1, 2, 3, 4};
  auto ep = Endpoint::connect(**domain, info->get(), hello, peer_private, 5000, 16, false, [](Endpoint&) -> Result<void> {
    return {};
  });
  ASSERT_TRUE(ep.ok()) << ep.error().describe();
  ASSERT_GE(peer_private.size(), 3u);
  const auto [remote, key] = segment_ready.get();

  std::vector<std::uint8_t> local(256 * 1024);
  for (std::size_t i = 0; i < local.size(); ++i) local[i] = static_cast<std::uint8_t>(i * 13 + 5);
  auto lmr = (*domain)->register_memory(local.data(), local.size(), false);
  ASSERT_TRUE(lmr.ok());
  EXPECT_TRUE(lmr->contains(local.data() + 10, 100));
  EXPECT_FALSE(lmr->contains(local.data() + local.size() - 4, 100));

  // RMA Write 256 KiB at offset 4096 of the server's buffer, by virtual address.
  OpContext wctx{}, rctx{}, sctx{};
  ASSERT_TRUE((*ep)->post_write(&wctx, local.data(), local.size(), lmr->desc(), remote, key).ok());
  std::vector<Completion> got;
  drain(**ep, 1, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error, 0);
  // Read it back into a fresh buffer and compare.
  std::vector<std::uint8_t> back(local.size(), 0);
  auto bmr = (*domain)->register_memory(back.data(), back.size(), false);
  ASSERT_TRUE(bmr.ok());
  ASSERT_TRUE((*ep)->post_read(&rctx, back.data(), back.size(), bmr->desc(), remote, key).ok());
  got.clear();
  drain(**ep, 1, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(back, local);
  // An unsignalled Write, then the message that ends the server's wait,
  // posted at once: the Send's is the only completion, and the data is in
  // place when the server sees the message.
  ASSERT_TRUE((*ep)->orders_send_after_write());
  std::vector<std::uint8_t> chained(kChained);
  for (std::size_t i = 0; i < chained.size(); ++i) chained[i] = static_cast<std::uint8_t>(i * 7 + 1);
  auto cmr = (*domain)->register_memory(chained.data(), chained.size(), false);
  ASSERT_TRUE(cmr.ok());
  OpContext unsignalled{};
  ASSERT_TRUE((*ep)->post_write(&unsignalled, chained.data(), chained.size(), cmr->desc(), remote + kChainedAt - 4096,
                                key, false)
                  .ok());
  const std::uint8_t bye[] = {'h', 'e', 'l', 'l', 'o'};
  ASSERT_TRUE((*ep)->post_send(&sctx, bye, sizeof bye, nullptr).ok());
  got.clear();
  drain(**ep, 1, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].context, &sctx);
  Completion more[4];
  auto extra = (*ep)->poll(more, 200);
  ASSERT_TRUE(extra.ok());
  EXPECT_EQ(*extra, 0u) << "an unsignalled Write reported a completion";
  server.join();
  EXPECT_EQ(chained_seen, chained);
  EXPECT_EQ(server_saw_private.size() >= 4 ? server_saw_private[server_saw_private.size() - 4] : 0, 1);
  EXPECT_EQ(std::vector<std::uint8_t>(target.begin() + 4096, target.begin() + 4096 + local.size()), local);
  EXPECT_EQ(target[4095], 0);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(server_inbox), 5), "hello");
}

}  // namespace
}  // namespace nfsrdma::fabric
