// Micro-benchmarks of the codecs on the data path: NFSv3 READ/WRITE/READDIRPLUS
// arguments and results, the RPC-over-RDMA header with its chunk lists, and
// chunk planning. JSON with --benchmark_format=json.
#include <benchmark/benchmark.h>

#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/rpcrdma/chunk_plan.hpp"
#include "lib/rpcrdma/header.hpp"

namespace {

using namespace nfsrdma;
using namespace nfsrdma::nfs3;

nfs_fh3 handle() {
  nfs_fh3 fh;
  fh.len = 36;
  for (std::uint32_t i = 0; i < fh.len; ++i) fh.data[i] = static_cast<std::uint8_t>(i * 7);
  return fh;
}

fattr3 attrs() {
  fattr3 a;
  a.mode = 0644;
  a.nlink = 1;
  a.size = a.used = 1 << 20;
  a.fileid = 42;
  return a;
}

template <class T>
void encode_bench(benchmark::State& state, const T& v) {
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    out.clear();
    xdr::encode(out, v);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
}

template <class T>
void decode_bench(benchmark::State& state, const T& v) {
  std::vector<std::uint8_t> wire;
  xdr::encode(wire, v);
  for (auto _ : state) {
    T back;
    auto r = xdr::decode(wire, back);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
}

const READ3args kRead{handle(), 1 << 30, 1 << 20};
WRITE3args write_args() {
  static std::vector<std::uint8_t> data(4096, 0x5a);  // small: the large payload goes by RDMA Read
  WRITE3args a;
  a.file = handle();
  a.offset = 1 << 20;
  a.count = 4096;
  a.data = data;
  return a;
}
READ3res read_res() {
  static std::vector<std::uint8_t> data(4096, 0xa5);
  READ3res r;
  r.file_attributes = attrs();
  r.count = 4096;
  r.eof = false;
  r.data = data;
  return r;
}
WRITE3res write_res() {
  WRITE3res r;
  r.file_wcc.after = attrs();
  r.count = 1 << 20;
  return r;
}
READDIRPLUS3res readdirplus_res() {
  READDIRPLUS3res r;
  r.dir_attributes = attrs();
  for (int i = 0; i < 100; ++i) {
    r.entries.push_back({static_cast<std::uint64_t>(i + 100), "entry-" + std::to_string(i),
                         static_cast<std::uint64_t>(i + 1), attrs(), handle()});
  }
  return r;
}

void BM_Read3argsEncode(benchmark::State& s) { encode_bench(s, kRead); }
void BM_Read3argsDecode(benchmark::State& s) { decode_bench(s, kRead); }
void BM_Write3argsEncode(benchmark::State& s) { encode_bench(s, write_args()); }
void BM_Write3argsDecode(benchmark::State& s) { decode_bench(s, write_args()); }
void BM_Read3resEncode(benchmark::State& s) { encode_bench(s, read_res()); }
void BM_Read3resDecode(benchmark::State& s) { decode_bench(s, read_res()); }
void BM_Write3resEncode(benchmark::State& s) { encode_bench(s, write_res()); }
void BM_Write3resDecode(benchmark::State& s) { decode_bench(s, write_res()); }
void BM_Readdirplus3res100Encode(benchmark::State& s) { encode_bench(s, readdirplus_res()); }
void BM_Readdirplus3res100Decode(benchmark::State& s) { decode_bench(s, readdirplus_res()); }
BENCHMARK(BM_Read3argsEncode);
BENCHMARK(BM_Read3argsDecode);
BENCHMARK(BM_Write3argsEncode);
BENCHMARK(BM_Write3argsDecode);
BENCHMARK(BM_Read3resEncode);
BENCHMARK(BM_Read3resDecode);
BENCHMARK(BM_Write3resEncode);
BENCHMARK(BM_Write3resDecode);
BENCHMARK(BM_Readdirplus3res100Encode);
BENCHMARK(BM_Readdirplus3res100Decode);

// An RDMA_MSG call with `segments` Read segments, a Write chunk and a Reply chunk.
rpcrdma::Header rdma_header(int segments) {
  rpcrdma::Header h;
  h.xid = 0x1234;
  h.credits = 128;
  for (int i = 0; i < segments; ++i) {
    h.read_list.push_back({128, {0x1000u + i, 1u << 16, 0x7f0000000000ull + (static_cast<std::uint64_t>(i) << 16)}});
  }
  rpcrdma::WriteChunk w;
  w.segments.push_back({0x2000, 1 << 20, 0x7f1000000000ull});
  h.write_list.push_back(w);
  h.reply_chunk = rpcrdma::WriteChunk{};
  h.reply_chunk->segments.push_back({0x3000, 4096, 0x7f2000000000ull});
  return h;
}

void BM_RpcRdmaHeaderEncode(benchmark::State& state) {
  auto h = rdma_header(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    out.clear();
    xdr::Encoder e(out);
    rpcrdma::encode_header(e, h);
    benchmark::DoNotOptimize(out.data());
  }
}
void BM_RpcRdmaHeaderDecode(benchmark::State& state) {
  auto h = rdma_header(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> wire;
  xdr::Encoder e(wire);
  rpcrdma::encode_header(e, h);
  for (auto _ : state) {
    auto d = rpcrdma::decode_header(wire);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_RpcRdmaHeaderEncode)->Arg(1)->Arg(16);
BENCHMARK(BM_RpcRdmaHeaderDecode)->Arg(1)->Arg(16);

void BM_PlanCall(benchmark::State& state) {
  // A 1 MiB WRITE (Read chunk), and a 1 MiB READ (Write chunk), alternately.
  rpcrdma::CallShape write{(1u << 20) + 200, 200, 1u << 20, 200, 0};
  rpcrdma::CallShape read{200, 0, 0, (1u << 20) + 1024, 1u << 20};
  bool w = false;
  for (auto _ : state) {
    auto p = rpcrdma::plan_call((w = !w) ? write : read, 4096, 4096);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlanCall);

}  // namespace

BENCHMARK_MAIN();
