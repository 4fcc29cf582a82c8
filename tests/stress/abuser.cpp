// abuser: one hostile client of a kind, against a running nfsrdma-server, for
// a bounded time (tests/stress/hostile_load_test.sh runs 32 of them beside
// well-behaved fio jobs). Loopback or test namespaces only.
//
//   idle          holds 8 connections open and silent; reopens what the server closes
//   never-read    a 4 KiB receive window, READs of 1 MiB sent and no reply read
//   fragments     a 1 MiB WRITE cut into one-byte fragments, every second
//   log-forge     MOUNT paths with newlines and escape codes, 50 a second
//   connect-flood connects and hangs up 100 times a second
//   rdma-never-read  RPC-over-RDMA: 32 READs of 1 MiB with Write chunks, never polled
// --connections N runs N of the kind at once, each with its own connections.
#include <poll.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <mutex>
#include <chrono>
#include <thread>

#include "lib/fabric/fabric.hpp"
#include "lib/nfs3/mount3.hpp"
#include "lib/rpc/sync_call.hpp"
#include "lib/transport/tcp/tcp_client.hpp"
#include "tests/raw_rdma.hpp"

using namespace nfsrdma;
using Clock = std::chrono::steady_clock;

namespace {

struct Target {
  std::string host = "127.0.0.1", source = "127.0.0.1", export_path, file;
  std::uint16_t port = 2049, mount_port = 20048, rdma_port = 20049;
};

// Closed with a reset, not into TIME_WAIT: thousands of those would hold the
// machine's ports for a minute after the test.
Fd connect_raw(const Target& t, int rcvbuf = 0) {
  return test::connect_raw(t.host, t.port, {.source = t.source, .rcvbuf = rcvbuf, .timeout_s = 1, .reset_on_close = true});
}

bool closed_by_peer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char b;
  return ::recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

// The file's handle, by MOUNT and LOOKUP.
nfs3::nfs_fh3 file_handle(const Target& t) {
  tcp::TcpClientOptions o;
  o.source_address = t.source;
  o.reserved_port = false;
  auto m = tcp::TcpClient::connect(t.host, t.mount_port, o);
  if (!m) throw std::runtime_error(m.error().describe());
  std::vector<std::uint8_t> a;
  xdr::encode(a, mount3::DirPath{t.export_path});
  auto mnt = rpc::call_sync(**m, mount3::kProgram, mount3::kVersion, static_cast<std::uint32_t>(mount3::Proc::MNT), a,
                            rpc::AuthSys{}, 5000);
  mount3::MNT3res mr;
  if (!mnt || !xdr::decode(*mnt, mr).ok() || mr.status != mount3::MNT3_OK) throw std::runtime_error("MNT failed");
  auto n = tcp::TcpClient::connect(t.host, t.port, o);
  if (!n) throw std::runtime_error(n.error().describe());
  std::vector<std::uint8_t> la;
  xdr::encode(la, nfs3::diropargs3{mr.fhandle, t.file});
  auto lk = rpc::call_sync(**n, nfs3::kProgram, nfs3::kVersion, static_cast<std::uint32_t>(nfs3::Proc::LOOKUP), la,
                           rpc::AuthSys{}, 5000);
  nfs3::LOOKUP3res lr;
  if (!lk || !xdr::decode(*lk, lr).ok() || lr.status != nfs3::NFS3_OK) throw std::runtime_error("LOOKUP failed");
  return lr.object;
}

// The file's handle, looked up once for all of a process's copies (each
// lookup takes a MOUNT connection of the address's few). Tried again for up
// to 30 s: under CI's load, with other abusers' 1 MiB READs queued for the
// server's workers, one LOOKUP can take longer than its 5 s.
const nfs3::nfs_fh3& shared_file_handle(const Target& t) {
  static std::once_flag once;
  static nfs3::nfs_fh3 fh;
  std::call_once(once, [&] {
    const auto until = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      try {
        fh = file_handle(t);
        return;
      } catch (const std::exception& e) {
        if (Clock::now() >= until) throw;
        std::fprintf(stderr, "abuser: %s; trying again\n", e.what());
      }
    }
  });
  return fh;
}

void idle(const Target& t, Clock::time_point end) {
  std::vector<Fd> held(8);
  while (Clock::now() < end) {
    for (auto& fd : held) {
      if (!fd.valid() || closed_by_peer(fd.get())) fd = connect_raw(t);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void never_read(const Target& t, Clock::time_point end) {
  const auto fh = shared_file_handle(t);
  std::vector<std::uint8_t> args;
  xdr::encode(args, nfs3::READ3args{fh, 0, 1 << 20});
  std::uint32_t xid = 1;
  while (Clock::now() < end) {
    Fd fd = connect_raw(t, 4096);
    while (fd.valid() && Clock::now() < end) {
      auto r = test::record(test::make_call(xid++, nfs3::kProgram, nfs3::kVersion, 6, args));
      if (::send(fd.get(), r.data(), r.size(), MSG_NOSIGNAL) < 0 && errno != EAGAIN) break;  // closed: again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void fragments(const Target& t, Clock::time_point end) {
  const auto fh = shared_file_handle(t);
  const std::string data(1 << 20, 'f');
  std::vector<std::uint8_t> args;
  xdr::encode(args, nfs3::WRITE3args{fh, 0, 1 << 20, nfs3::stable_how::UNSTABLE,
                                     {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}});
  const auto call = test::make_call(0xf4a6, nfs3::kProgram, nfs3::kVersion, 7, args);
  std::vector<std::uint8_t> tiny;
  for (std::size_t i = 0; i < call.size(); ++i) {
    tiny.insert(tiny.end(), {static_cast<std::uint8_t>(i + 1 == call.size() ? 0x80 : 0), 0, 0, 1, call[i]});
  }
  std::vector<std::uint8_t> sink(1 << 16);
  while (Clock::now() < end) {
    Fd fd = connect_raw(t);
    if (fd.valid() && ::send(fd.get(), tiny.data(), tiny.size(), MSG_NOSIGNAL) > 0) {
      (void)::recv(fd.get(), sink.data(), sink.size(), 0);  // the reply (or a timeout): then hang up
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

void log_forge(const Target& t, Clock::time_point end) {
  tcp::TcpClientOptions o;
  o.source_address = t.source;
  o.reserved_port = false;
  while (Clock::now() < end) {
    auto m = tcp::TcpClient::connect(t.host, t.mount_port, o);
    while (m && Clock::now() < end) {
      std::vector<std::uint8_t> a;
      xdr::encode(a, mount3::DirPath{"/x\n2026-01-01T00:00:00.000 info [1] mount: 10.0.0.1 mounted /etc\x1b[2J"});
      if (!rpc::call_sync(**m, mount3::kProgram, mount3::kVersion, static_cast<std::uint32_t>(mount3::Proc::MNT), a,
                          rpc::AuthSys{}, 2000)) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void connect_flood(const Target& t, Clock::time_point end) {
  while (Clock::now() < end) {
    Fd fd = connect_raw(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void rdma_never_read(const Target& t, Clock::time_point end) {
  const auto fh = shared_file_handle(t);
  std::uint32_t xid = 1;
  while (Clock::now() < end) {
    try {
      test::RawRdma raw(t.rdma_port);
      for (int i = 0; i < 32; ++i, ++xid) {
        rpcrdma::Header h = test::call_header(xid);
        rpcrdma::WriteChunk into;
        into.segments.push_back(raw.segment(0, 1 << 20));
        h.write_list.push_back(into);
        raw.send(test::message(h, test::read_call(xid, fh, 1 << 20)));
      }
      for (int i = 0; i < 150 && Clock::now() < end; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // refused or closed: try again
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  nfsrdma::fabric::restore_default_signals();
  CLI::App app{"abuser: one hostile NFS client of a kind, for a bounded time (tests only)"};
  Target t;
  std::string kind;
  double seconds = 10;
  app.add_option("--kind", kind, "idle, never-read, fragments, log-forge, connect-flood or rdma-never-read")
      ->required()->check(CLI::IsMember({"idle", "never-read", "fragments", "log-forge", "connect-flood",
                                         "rdma-never-read"}));
  app.add_option("--host", t.host, "Server address")->capture_default_str();
  app.add_option("--source", t.source, "Address to connect from")->capture_default_str();
  app.add_option("--port", t.port, "NFS TCP port")->capture_default_str();
  app.add_option("--mount-port", t.mount_port, "MOUNT TCP port")->capture_default_str();
  app.add_option("--rdma-port", t.rdma_port, "RPC-RDMA port")->capture_default_str();
  app.add_option("--export", t.export_path, "Exported path (kinds that need a file)");
  app.add_option("--file", t.file, "A file in the export, at least 1 MiB (never-read, fragments)");
  app.add_option("--seconds", seconds, "How long to keep at it")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  unsigned copies = 1;
  app.add_option("--connections", copies, "How many of the kind at once")->capture_default_str()->check(
      CLI::Range(1u, 1024u));
  CLI11_PARSE(app, argc, argv);
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<long>(seconds * 1000));
  std::atomic<int> failed{0};
  std::vector<std::thread> all;
  for (unsigned i = 0; i < copies; ++i) {
    all.emplace_back([&] {
      try {
        if (kind == "idle") idle(t, end);
        else if (kind == "never-read") never_read(t, end);
        else if (kind == "fragments") fragments(t, end);
        else if (kind == "log-forge") log_forge(t, end);
        else if (kind == "connect-flood") connect_flood(t, end);
        else rdma_never_read(t, end);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "abuser %s: %s\n", kind.c_str(), e.what());
        ++failed;
      }
    });
  }
  for (auto& th : all) th.join();
  return failed ? 1 : 0;
}
