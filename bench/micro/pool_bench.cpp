// Micro-benchmarks of buffer pools on the data path: the RDMA transport's
// registered slots (take/give, and the waiting lease), and the FUSE client's
// write-behind chunks (acquire/release). JSON with --benchmark_format=json.
#include <benchmark/benchmark.h>

#include "client/fuse/buffer_pool.hpp"
#include "lib/fabric/fabric.hpp"
#include "lib/transport/rdma/buffers.hpp"

namespace {

using namespace nfsrdma;

// A tcp-provider domain: registration as the transport does it, no peer needed.
struct Domain {
  fabric::Info info;
  std::unique_ptr<fabric::Domain> domain;
  Domain() {
    auto i = fabric::get_info("tcp", "127.0.0.1", "0", true);
    if (!i) throw std::runtime_error(i.error().describe());
    info = std::move(*i);
    domain = fabric::Domain::open(info.get()).value();
  }
};

void BM_SlotPoolTakeGive(benchmark::State& state) {
  Domain d;
  auto pool = rdma::SlotPool::create(*d.domain, 128, 1 << 20, true).value();
  for (auto _ : state) {
    auto s = pool->take();
    benchmark::DoNotOptimize(s);
    pool->give(*s);
  }
}
BENCHMARK(BM_SlotPoolTakeGive)->ThreadRange(1, 2);

void BM_PayloadPoolLeaseGive(benchmark::State& state) {
  Domain d;
  rdma::PayloadPool pool(rdma::SlotPool::create(*d.domain, 128, 1 << 20, true).value());
  rdma::PayloadPool::Account account(32);
  for (auto _ : state) {
    std::size_t got = 0;
    pool.lease(account, [&](std::size_t slot) { got = slot; });
    pool.give(account, got);
  }
}
BENCHMARK(BM_PayloadPoolLeaseGive);

void BM_FuseBufferPoolAcquireRelease(benchmark::State& state) {
  static fuse::BufferPool pool(64 << 10, 512);
  for (auto _ : state) {
    auto* c = pool.acquire();
    benchmark::DoNotOptimize(c);
    pool.release(c);
  }
}
BENCHMARK(BM_FuseBufferPoolAcquireRelease)->ThreadRange(1, 2);

}  // namespace

BENCHMARK_MAIN();
