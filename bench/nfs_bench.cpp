// nfs_bench: NFS READ or WRITE bandwidth through client/core over RPC-RDMA or
// TCP at a block size and queue depth: the NFS path itself, no FUSE, no kernel.
// Prints one line (or JSON): MiB/s, IOPS, mean latency, client CPU per GiB.
//
//   nfs_bench --server 127.0.0.1:/srv/pool --proto rdma --op read --bs 1M --depth 16
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "client/core/nfs_client.hpp"
#include "lib/base/log.hpp"
#include "lib/fabric/fabric.hpp"

using namespace nfsrdma;
using namespace nfsrdma::nfs3;
using Clock = std::chrono::steady_clock;

namespace {

// NFSPROC3_NULL has no arguments and no results.
struct Void {};
template <class X>
void codec(X&, Void&) {}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::size_t parse_size(const std::string& s) {
  std::size_t n = std::stoul(s);
  char unit = s.empty() ? 0 : static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  if (unit == 'K') n <<= 10;
  if (unit == 'M') n <<= 20;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  nfsrdma::fabric::restore_default_signals();
  CLI::App app{"nfs_bench: NFS READ/WRITE bandwidth through client/core (RPC-RDMA or TCP)"};
  std::string server, proto = "rdma", op = "read", bs_text = "1M", file = "nfs_bench.dat", provider;
  std::uint16_t port = 0, mount_port = 0;
  std::size_t depth = 16, region_mib = 256;
  double seconds = 3;
  bool json = false, zero_copy = false;
  app.add_option("--server", server, "host:/export")->required();
  app.add_option("--proto", proto, "rdma or tcp")->check(CLI::IsMember({"rdma", "tcp"}))->capture_default_str();
  app.add_option("--op", op,
                 "read, write, null (NULL calls: the RPC round trip alone), getattr or access (of a file in use), "
                 "lookup (of the file's name in the export)")
      ->check(CLI::IsMember({"read", "write", "null", "getattr", "access", "lookup"}))->capture_default_str();
  app.add_option("--bs", bs_text, "Block size (e.g. 64K, 1M)")->capture_default_str();
  app.add_option("--depth", depth, "Calls in flight")->capture_default_str()->check(CLI::Range(1, 128));
  app.add_option("--seconds", seconds, "Duration")->capture_default_str();
  app.add_option("--file", file, "File in the export (created for writes, filled for reads)")->capture_default_str();
  app.add_option("--region-mib", region_mib, "Bytes of the file the blocks cycle over")->capture_default_str();
  app.add_option("--port", port, "NFS port (default: 20049 for rdma, portmapper for tcp)");
  app.add_option("--mount-port", mount_port, "MOUNT port (default: portmapper)");
  app.add_option("--provider", provider, "libfabric provider for rdma");
  app.add_flag("--json", json, "Print JSON");
  app.add_flag("--zero-copy", zero_copy, "Register the I/O buffers once, so data moves without copies over RDMA");
  CLI11_PARSE(app, argc, argv);
  init_logging("warn");
  const std::size_t bs = parse_size(bs_text);
  client::NfsClientOptions o;
  if (auto r = client::parse_source(server, o); !r) {
    std::fprintf(stderr, "nfs_bench: --server %s\n", r.error().message.c_str());
    return 2;
  }
  o.proto = proto == "rdma" ? client::Proto::rdma : client::Proto::tcp;
  o.port = port;
  o.mount_port = mount_port;
  o.provider = provider;
  auto c = client::NfsClient::connect(o);
  if (!c) {
    std::fprintf(stderr, "nfs_bench: %s\n", c.error().describe().c_str());
    return 1;
  }
  client::NfsClient& nfs = **c;
  // One call per block: a block larger than the server takes in one READ or
  // WRITE (FSINFO) would measure something else, so it is refused.
  auto info = nfs.call_sync<FSINFO3res>(Proc::FSINFO, FhArgs{nfs.root()});
  if (!info || info->status != NFS3_OK) {
    std::fprintf(stderr, "nfs_bench: FSINFO failed\n");
    return 1;
  }
  if (std::uint32_t max = op == "read" ? info->rtmax : info->wtmax; (op == "read" || op == "write") && max && bs > max) {
    std::fprintf(stderr, "nfs_bench: the server takes at most %u bytes per %s (FSINFO); use --bs %uK or less\n", max,
                 op == "read" ? "READ" : "WRITE", max / 1024);
    return 2;
  }
  CREATE3args ca;
  ca.where = {nfs.root(), file};
  ca.obj_attributes.mode = 0644;
  auto cr = nfs.call_sync<CreateRes>(Proc::CREATE, ca);
  if (!cr || cr->status != NFS3_OK || !cr->obj) {
    std::fprintf(stderr, "nfs_bench: cannot create %s\n", file.c_str());
    return 1;
  }
  const nfs_fh3 fh = *cr->obj;
  const std::size_t blocks = std::max<std::size_t>(1, (region_mib << 20) / bs);
  // One buffer per call in flight, as fio gives each io_u its own.
  std::vector<std::uint8_t> buffers(bs * depth, 0x5a);
  std::vector<std::size_t> free_slots;
  for (std::size_t i = 0; i < depth; ++i) free_slots.push_back(i);
  auto slot = [&](std::size_t i) { return std::span(buffers).subspan(i * bs, bs); };
  if (zero_copy) {
    if (auto r = nfs.register_memory(buffers); !r) {
      std::fprintf(stderr, "nfs_bench: %s\n", r.error().describe().c_str());
      return 1;
    }
  }
  // Fill the region once, so reads return data; for GETATTR and ACCESS one
  // block, so the file is in use (a server may keep files it reads or writes open).
  if (op == "read" || op == "getattr" || op == "access") {
    for (std::size_t b = 0; b < (op == "read" ? blocks : 1); ++b) {
      auto w = nfs.write_sync(WRITE3args{fh, b * bs, static_cast<std::uint32_t>(bs), stable_how::UNSTABLE, slot(0)});
      if (!w || w->status != NFS3_OK) {
        std::fprintf(stderr, "nfs_bench: filling the file failed\n");
        return 1;
      }
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  std::size_t outstanding = 0, done_ops = 0, next = 0, errors = 0;
  double latency_sum = 0;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // Called with `mu` held; returns with it held.
  std::function<void(std::unique_lock<std::mutex>&)> issue = [&](std::unique_lock<std::mutex>& held) {
    std::uint64_t off = (next++ % blocks) * bs;
    std::size_t i = free_slots.back();
    free_slots.pop_back();
    held.unlock();
    auto t0 = Clock::now();
    auto finish = [&, t0, i](bool ok) {
      std::lock_guard lk(mu);
      latency_sum += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      ++done_ops;
      if (!ok) ++errors;
      --outstanding;
      free_slots.push_back(i);
      cv.notify_all();
    };
    if (op == "null") {
      nfs.call<Void>(Proc::NULL_, Void{}, [finish](Result<Void> r) { finish(r.ok()); });
    } else if (op == "getattr") {
      nfs.call<GETATTR3res>(Proc::GETATTR, FhArgs{fh}, [finish](Result<GETATTR3res> r) {
        finish(r && r->status == NFS3_OK);
      });
    } else if (op == "lookup") {
      nfs.call<LOOKUP3res>(Proc::LOOKUP, diropargs3{nfs.root(), file}, [finish](Result<LOOKUP3res> r) {
        finish(r && r->status == NFS3_OK);
      });
    } else if (op == "access") {
      nfs.call<ACCESS3res>(Proc::ACCESS, ACCESS3args{fh, ACCESS3_READ | ACCESS3_MODIFY}, [finish](Result<ACCESS3res> r) {
        finish(r && r->status == NFS3_OK);
      });
    } else if (op == "read") {
      nfs.read(fh, off, slot(i), [finish, bs](Result<client::NfsClient::ReadResult> r) {
        finish(r && r->status == NFS3_OK && r->count == bs);
      });
    } else {
      nfs.write(WRITE3args{fh, off, static_cast<std::uint32_t>(bs), stable_how::UNSTABLE, slot(i)},
                [finish, bs](Result<WRITE3res> r) { finish(r && r->status == NFS3_OK && r->count == bs); });
    }
    held.lock();
  };
  const double cpu0 = cpu_seconds();
  const auto start = Clock::now();
  std::unique_lock lk(mu);
  while (Clock::now() < end) {
    while (outstanding < depth && Clock::now() < end) {
      ++outstanding;
      issue(lk);
    }
    cv.wait_for(lk, std::chrono::milliseconds(50), [&] { return outstanding < depth; });
  }
  cv.wait(lk, [&] { return outstanding == 0; });
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu0;
  const double mib = op == "read" || op == "write" ? static_cast<double>(done_ops * bs) / (1 << 20) : 0;
  const double mibs = mib / secs, iops = static_cast<double>(done_ops) / secs;
  const double lat = done_ops ? latency_sum / static_cast<double>(done_ops) : 0;
  const double cpu_per_gib = mib > 0 ? cpu / (mib / 1024) : 0;
  if (json) {
    nlohmann::json out = {{"proto", proto}, {"op", op}, {"bs", bs}, {"depth", depth}, {"zero_copy", zero_copy},
                           {"mib_per_s", std::round(mibs * 10) / 10}, {"iops", std::round(iops)},
                           {"mean_latency_us", std::round(lat * 10) / 10},
                           {"client_cpu_s_per_gib", std::round(cpu_per_gib * 1000) / 1000}, {"errors", errors}};
    std::printf("%s\n", out.dump().c_str());
  } else if (op == "read" || op == "write") {
    std::printf("%s %s bs=%s depth=%zu%s: %.0f MiB/s, %.0f IOPS, mean latency %.0f us, client CPU %.2f s/GiB%s\n",
                proto.c_str(), op.c_str(), bs_text.c_str(), depth, zero_copy ? " zero-copy" : "", mibs, iops, lat,
                cpu_per_gib, errors ? ", ERRORS" : "");
  } else {  // calls that move no file data
    std::printf("%s %s depth=%zu: %.0f calls/s, mean latency %.0f us%s\n", proto.c_str(), op.c_str(), depth, iops,
                lat, errors ? ", ERRORS" : "");
  }
  return errors ? 1 : 0;
}
