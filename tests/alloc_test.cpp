// Heap allocations per call on the data path, counted: the server and a
// client in this process (caller-driven progress, as the fio engine runs
// it), over RPC-over-RDMA and over TCP, 4 KiB READs and WRITEs at 32 in flight
// from and into registered memory (over RDMA both go inline, in one Send
// each), and WRITEs from memory not registered, which the client copies. Once warm (buffers grown, the duplicate request cache full), a call
// allocates nothing on either side. Every malloc in the process counts:
// libstdc++'s operator new, libfabric's, the server's threads'. What timers
// allocate meanwhile (the open-file cache's reaper) is a few a second, so the
// bound is one allocation per 100 calls: anything done per call, or per batch
// of calls, is far above it (the soft-RoCE guest, ten times slower, shows
// about one per 1,000 calls).
#include <malloc.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>

#include "client/core/nfs_client.hpp"
#include "server/server.hpp"
#include "tests/server_harness.hpp"

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}

// The counting hook: this executable's definitions come before libc's for
// every library in the process.
extern "C" void* malloc(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t a, std::size_t b) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
extern "C" void* aligned_alloc(std::size_t align, std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, n);
}
extern "C" int posix_memalign(void** out, std::size_t align, std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

namespace nfsrdma::test {
namespace {

using namespace nfs3;
using client::NfsClient;

constexpr std::size_t kDepth = 32, kBlock = 4096, kFileBlocks = 256;

class Allocations : public ::testing::TestWithParam<client::Proto> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    std::vector<std::uint8_t> data(kFileBlocks * kBlock, 0x5a);
    std::ofstream(dir_.path() + "/file", std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    server::ServerConfig cfg;
    auto entry = server::parse_export_line(dir_.path() + " " + test_client_host() + "(rw,no_root_squash)");
    ASSERT_TRUE(entry.ok()) << entry.error().describe();
    cfg.exports.push_back(*entry);
    cfg.bind_address = test_server_host();
    cfg.nfs_port = free_port();
    cfg.mount_port = free_port();
    cfg.register_rpcbind = false;
    cfg.state_dir = state_.path();
    cfg.threads = 2;
    cfg.rdma_options.provider = test_provider();
    cfg.rdma_options.port = free_port();
    auto s = server::Server::start(cfg);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    server_ = std::move(*s);
    serving_ = std::thread([this] { server_->run(); });
    nfs_port_ = cfg.nfs_port;
    rdma_port_ = cfg.rdma_options.port;
    mount_port_ = cfg.mount_port;
    connect_client(128);
  }
  // The client, as the fio engine runs it (caller-driven progress), with at
  // most `credits` RDMA calls in flight.
  void connect_client(std::uint32_t credits) {
    nfs_.reset();
    client::NfsClientOptions o;
    o.host = test_server_host();
    o.export_path = dir_.path();
    o.proto = GetParam();
    o.port = o.proto == client::Proto::rdma ? rdma_port_ : nfs_port_;
    o.mount_port = mount_port_;
    o.provider = test_provider();
    o.credits = credits;
    o.caller_progress = true;
    auto c = NfsClient::connect(o);
    ASSERT_TRUE(c.ok()) << c.error().describe();
    nfs_ = std::move(*c);
    auto lk = nfs_->call_sync<LOOKUP3res>(Proc::LOOKUP, diropargs3{nfs_->root(), "file"});
    ASSERT_TRUE(lk.ok() && lk->status == NFS3_OK);
    fh_ = lk->object;
    ASSERT_TRUE(nfs_->register_memory(buffers_).ok());
  }
  void TearDown() override {
    nfs_.reset();
    if (server_) server_->shutdown();
    if (serving_.joinable()) serving_.join();
  }

  // `calls` READs or WRITEs, kDepth at a time. Its callbacks capture two
  // words, which std::function holds without allocating: this test counts
  // its own allocations too.
  // Atomics: a call that timed out would end on the client's maintenance thread.
  struct Loop {
    Allocations* t;
    bool write;
    std::size_t calls;
    bool unregistered = false;  // WRITE data from memory not registered: the client copies it
    std::atomic<std::size_t> issued{0}, done{0}, failed{0};
    void issue(std::size_t slot) {
      const std::size_t n = issued.fetch_add(1);
      if (n >= calls) return;
      auto& from = unregistered ? t->unregistered_ : t->buffers_;
      std::span<std::uint8_t> buf(from.data() + slot * kBlock, kBlock);
      const std::uint64_t offset = (n * 7 % kFileBlocks) * kBlock;
      if (write) {
        WRITE3args a{t->fh_, offset, kBlock, stable_how::UNSTABLE, buf};
        t->nfs_->write(a, [this, slot](Result<WRITE3res> r) { finished(slot, r && r->status == NFS3_OK); });
      } else {
        t->nfs_->read(t->fh_, offset, buf, [this, slot](Result<NfsClient::ReadResult> r) {
          finished(slot, r && r->status == NFS3_OK && r->count == kBlock);
        });
      }
    }
    void finished(std::size_t slot, bool ok) {
      if (!ok) ++failed;
      issue(slot);
      ++done;
    }
  };
  // Returns how many failed or never completed.
  std::size_t run(bool write, std::size_t calls, bool unregistered) {
    Loop loop{this, write, calls, unregistered};
    for (std::size_t i = 0; i < kDepth; ++i) loop.issue(i);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (loop.done < calls && std::chrono::steady_clock::now() < until) {
      // Held as the fio engine's commit holds its calls: the next ones,
      // made by the replies' callbacks, leave together.
      NfsClient::SendBatch batch(*nfs_);
      nfs_->progress(100);
    }
    const std::size_t left = loop.failed + (calls - loop.done);
    if (loop.done < calls) nfs_.reset();  // its calls end now, while `loop` is still here
    return left;
  }

  // Allocations per call over `calls`, after `warm` calls to reach the steady state.
  static constexpr double kBound = 0.01;
  double per_call(bool write, std::size_t warm, std::size_t calls, bool unregistered = false) {
    EXPECT_EQ(run(write, warm, unregistered), 0u);
    const std::uint64_t before = g_allocations.load();
    EXPECT_EQ(run(write, calls, unregistered), 0u);
    const std::uint64_t n = g_allocations.load() - before;
    std::cout << (GetParam() == client::Proto::rdma ? "rdma " : "tcp ") << (write ? "WRITE" : "READ") << ": " << n << " allocations in " << calls << " calls\n";
    return static_cast<double>(n) / static_cast<double>(calls);
  }

  TempDir dir_, state_;
  std::uint16_t nfs_port_ = 0, rdma_port_ = 0, mount_port_ = 0;
  std::unique_ptr<server::Server> server_;
  std::thread serving_;
  std::unique_ptr<NfsClient> nfs_;
  nfs_fh3 fh_;
  std::vector<std::uint8_t> buffers_ = std::vector<std::uint8_t>(kDepth * kBlock);
  std::vector<std::uint8_t> unregistered_ = std::vector<std::uint8_t>(kDepth * kBlock, 0x33);
};

std::string* volatile g_sink;

TEST_P(Allocations, TheHookCounts) {
  const std::uint64_t before = g_allocations.load();
  g_sink = new std::string(1000, 'x');  // the object and its characters
  delete g_sink;
  EXPECT_EQ(g_allocations.load() - before, 2u);
}

TEST_P(Allocations, NoneForReadsInTheSteadyState) {
  // The warm-up and counted runs are bounded, not timed: a slow machine takes longer, not fewer calls.
  EXPECT_LT(per_call(false, 4000, 20000), kBound);
}

TEST_P(Allocations, NoneForWritesInTheSteadyState) {
  // WRITE is non-idempotent: it goes through the duplicate request cache, whose
  // 8192 entries are reused once it has filled.
  EXPECT_LT(per_call(true, 10000, 20000), kBound);
}

TEST_P(Allocations, NoneForWritesFromUnregisteredMemory) {
  // The FUSE client's case: the data is copied into the call, whose buffer is
  // kept with it for the next call.
  EXPECT_LT(per_call(true, 10000, 20000, true), kBound);
}

TEST_P(Allocations, NoneWhenCallsWaitForCredits) {
  // 32 in flight on 8 credits over RDMA: most calls wait in the transport's
  // queue for a reply to free a credit, read from the client's record in place.
  connect_client(8);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_LT(per_call(false, 4000, 20000), kBound);
  EXPECT_LT(per_call(true, 10000, 20000, true), kBound);
}

INSTANTIATE_TEST_SUITE_P(Transports, Allocations, ::testing::Values(client::Proto::rdma, client::Proto::tcp),
                         [](const auto& p) { return p.param == client::Proto::rdma ? "rdma" : "tcp"; });

}  // namespace
}  // namespace nfsrdma::test
