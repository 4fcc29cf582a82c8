// fabric_bench: raw libfabric numbers for a provider, the transport limit that
// NFS over RPC-RDMA is measured against. A server when no peer is given (as
// fabtests); the client prints one table (or JSON with --json):
//   send/recv round-trip latency (64 B), RMA Write and RMA Read bandwidth,
//   and the rate of READ- and WRITE-shaped calls (see Kind).
//
//   fabric_bench [--provider tcp] [--port 20050]                 # server
//   fabric_bench --peer 127.0.0.1 [--seconds 2] [--depth 16]     # client
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "lib/base/log.hpp"
#include "lib/fabric/fabric.hpp"

using namespace nfsrdma;
using namespace nfsrdma::fabric;
using Clock = std::chrono::steady_clock;

namespace {

double round2(double v) { return std::round(v * 100) / 100; }

// call/reply: the shape of an RPC-over-RDMA READ with no server work: the
// call names a client buffer (addr, len, key; pad[0] its slot), the server
// RMA-Writes len bytes there and then sends the reply, not waiting between.
// wcall/reply: a WRITE's shape: the server RMA-Reads len bytes from the
// client's buffer and sends the reply once the Read completed.
enum class Kind : std::uint32_t { hello = 1, ping = 2, pong = 3, done = 4, call = 5, reply = 6, wcall = 7 };
struct Message {
  Kind kind;
  std::uint32_t key;
  std::uint64_t addr;
  std::uint64_t len;
  std::uint8_t pad[40];
};
static_assert(sizeof(Message) == 64);

constexpr std::size_t kSlots = 32;  // posted receives per side

// Receive/send buffers and their contexts, registered once.
struct Messages {
  std::vector<Message> slots = std::vector<Message>(kSlots * 2);
  std::vector<OpContext> ctx = std::vector<OpContext>(kSlots * 2);
  MemoryRegion mr;
  Message* recv(std::size_t i) { return &slots[i]; }
  Message* send(std::size_t i) { return &slots[kSlots + i]; }
  std::size_t index_of(const void* c) const { return static_cast<const OpContext*>(c) - ctx.data(); }
};

[[noreturn]] void die(const Error& e) {
  std::fprintf(stderr, "fabric_bench: %s\n", e.describe().c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r) {
  if (!r) die(r.error());
  return std::move(*r);
}
void must(Result<void> r) {
  if (!r) die(r.error());
}

Messages setup_messages(Domain& d, Endpoint& ep) {
  Messages m;
  m.mr = must(d.register_memory(m.slots.data(), m.slots.size() * sizeof(Message), false));
  for (std::size_t i = 0; i < kSlots; ++i) must(ep.post_recv(&m.ctx[i], m.recv(i), sizeof(Message), m.mr.desc()));
  return m;
}

// Reaps completions, keeping received messages (reposting their buffers) and
// counting sends, so waiting for one kind never loses the other.
struct Pump {
  Endpoint& ep;
  Messages& m;
  std::deque<Message> inbox;
  std::size_t sends_done = 0;
  std::function<void(void*)> on_read;  // an RMA Read completed (its context)

  void step() {
    Completion c[8];
    std::size_t n = must(ep.poll(c, 1000));
    for (std::size_t i = 0; i < n; ++i) {
      if (c[i].error) {
        die(Error{ErrorDomain::fabric, c[i].error, Action::fail,
                  "completion with an error (flags " + std::to_string(c[i].flags) + ")"});
      }
      if (c[i].flags & FI_RECV) {
        std::size_t slot = m.index_of(c[i].context);
        inbox.push_back(*m.recv(slot));
        must(ep.post_recv(&m.ctx[slot], m.recv(slot), sizeof(Message), m.mr.desc()));
      } else if (c[i].flags & FI_SEND) {
        ++sends_done;
      } else if ((c[i].flags & FI_READ) && on_read) {
        on_read(c[i].context);
      }
    }
    if (n == 0 && ep.peer_gone()) die(Error{ErrorDomain::fabric, 0, Action::fail, "peer disconnected"});
  }
  Message receive() {
    while (inbox.empty()) step();
    Message msg = inbox.front();
    inbox.pop_front();
    return msg;
  }
  void send(const Message& msg) {
    *m.send(0) = msg;
    std::size_t before = sends_done;
    must(ep.post_send(&m.ctx[kSlots], m.send(0), sizeof(Message), m.mr.desc()));
    while (sends_done == before) step();
  }
};

int run_server(const std::string& provider, std::uint16_t port, std::size_t buffer_bytes) {
  auto l = must(Listener::listen(provider, "", port));
  std::printf("fabric_bench: serving on %s port %u\n", provider.c_str(), l->port());
  std::fflush(stdout);
  for (;;) {
    auto req = must(l->wait_request(-1));
    if (!req) continue;
    std::vector<std::uint8_t> buffer(buffer_bytes);
    Domain& domain = *must(l->domain_for(*req));
    MemoryRegion target = must(domain.register_memory(buffer.data(), buffer.size(), true));
    Messages storage;
    Messages* msgs = &storage;
    auto ep = must(Endpoint::accept(domain, req->info.get(), {}, 5000, 64, [&](Endpoint& e) -> Result<void> {
      storage = setup_messages(domain, e);
      return {};
    }));
    Pump pump{*ep, *msgs, {}, 0};
    // Call replies' RMA Writes: unsignalled, as the server's are, where the
    // provider orders the Send behind them; else their completions are only reaped.
    OpContext write_ctx;
    const bool chain = ep->orders_send_after_write();
    std::vector<OpContext> read_ctx(kSlots);  // WRITE-shaped calls' RMA Reads, by slot
    auto reply = [&](std::size_t slot) {
      *msgs->send(slot) = Message{Kind::reply, 0, 0, 0, {static_cast<std::uint8_t>(slot)}};
      must(ep->post_send(&msgs->ctx[kSlots + slot], msgs->send(slot), sizeof(Message), msgs->mr.desc()));
    };
    pump.on_read = [&](void* ctx) { reply(static_cast<OpContext*>(ctx) - read_ctx.data()); };
    pump.send(Message{Kind::hello, target.key(), target.remote_address(buffer.data()), buffer.size(), {}});
    // Serve pings; keep polling meanwhile, which is also what moves the peer's RMA.
    for (;;) {
      Message m = pump.receive();
      if (m.kind == Kind::done) break;
      if (m.kind == Kind::ping) pump.send(Message{Kind::pong, 0, 0, 0, {}});
      if (m.kind == Kind::call) {
        std::size_t slot = m.pad[0] % kSlots;
        must(ep->post_write(&write_ctx, buffer.data(), std::min<std::size_t>(m.len, buffer.size()), target.desc(),
                            m.addr, m.key, !chain));
        reply(slot);
      }
      if (m.kind == Kind::wcall) {
        std::size_t slot = m.pad[0] % kSlots;
        std::size_t len = std::min<std::size_t>(m.len, buffer.size() / kSlots);
        must(ep->post_read(&read_ctx[slot], buffer.data() + slot * len, len, target.desc(), m.addr, m.key));
      }
    }
    ep->shutdown();
  }
}

struct Row {
  std::string test, size;
  std::size_t depth;
  double value;
  std::string unit;
  double p99 = 0;
};

double rma_bandwidth(Endpoint& ep, Domain& d, const Message& hello, bool write, std::size_t block, std::size_t depth,
                     double seconds) {
  std::vector<std::uint8_t> local(block * depth);
  MemoryRegion mr = must(d.register_memory(local.data(), local.size(), false));
  std::vector<OpContext> ctx(depth);
  std::size_t slots_in_target = std::max<std::size_t>(1, hello.len / block);
  std::uint64_t bytes = 0, next = 0;
  auto post = [&](std::size_t i) {
    std::uint64_t remote = hello.addr + (next++ % slots_in_target) * block;
    void* buf = local.data() + i * block;
    // One operation per block; max_rma_bytes() is far above our block sizes on every provider we use.
    if (write) {
      must(ep.post_write(&ctx[i], buf, block, mr.desc(), remote, hello.key));
    } else {
      must(ep.post_read(&ctx[i], buf, block, mr.desc(), remote, hello.key));
    }
  };
  for (std::size_t i = 0; i < depth; ++i) post(i);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::size_t outstanding = depth;
  while (outstanding > 0) {
    Completion c[32];
    std::size_t n = must(ep.poll(c, 1000));
    for (std::size_t k = 0; k < n; ++k) {
      if (c[k].error) die(Error{ErrorDomain::fabric, c[k].error, Action::fail, "RMA completion with an error"});
      bytes += block;
      --outstanding;
      if (Clock::now() < end) {
        post(static_cast<std::size_t>(static_cast<OpContext*>(c[k].context) - ctx.data()));
        ++outstanding;
      }
    }
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(bytes) / secs / (1 << 20);
}

// Calls per second of READ-shaped (`kind` call) or WRITE-shaped (wcall)
// calls, see Kind, with `block`-byte payloads and `depth` in flight: the
// provider's ceiling for small NFS READs and WRITEs.
double call_rate(Endpoint& ep, Domain& d, Messages& m, Kind kind, std::size_t block, std::size_t depth,
                 double seconds) {
  depth = std::min(depth, kSlots);
  std::vector<std::uint8_t> local(block * depth);
  MemoryRegion mr = must(d.register_memory(local.data(), local.size(), true));
  auto post = [&](std::size_t slot) {
    *m.send(slot) = Message{kind, static_cast<std::uint32_t>(mr.key()),
                            mr.remote_address(local.data() + slot * block), block, {static_cast<std::uint8_t>(slot)}};
    must(ep.post_send(&m.ctx[kSlots + slot], m.send(slot), sizeof(Message), m.mr.desc()));
  };
  for (std::size_t i = 0; i < depth; ++i) post(i);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::size_t outstanding = depth, calls = 0;
  while (outstanding > 0) {
    Completion c[32];
    std::size_t n = must(ep.poll(c, 1000));
    for (std::size_t k = 0; k < n; ++k) {
      if (c[k].error) die(Error{ErrorDomain::fabric, c[k].error, Action::fail, "call completion with an error"});
      if (!(c[k].flags & FI_RECV)) continue;
      std::size_t slot = m.index_of(c[k].context);
      std::size_t call = m.recv(slot)->pad[0];
      must(ep.post_recv(&m.ctx[slot], m.recv(slot), sizeof(Message), m.mr.desc()));
      ++calls;
      --outstanding;
      if (Clock::now() < end) {
        post(call);
        ++outstanding;
      }
    }
  }
  return static_cast<double>(calls) / std::chrono::duration<double>(Clock::now() - start).count();
}

int run_client(const std::string& provider, const std::string& peer, std::uint16_t port, double seconds,
               std::size_t depth, bool json) {
  auto info = must(get_info(provider, peer, std::to_string(port), false));
  auto domain = must(Domain::open(info.get()));
  std::vector<std::uint8_t> peer_private;
  Messages m;
  auto ep = must(Endpoint::connect(*domain, info.get(), {}, peer_private, 5000, 64, false, [&](Endpoint& e) -> Result<void> {
    m = setup_messages(*domain, e);
    return {};
  }));
  Pump pump{*ep, m, {}, 0};
  Message hello = pump.receive();
  if (hello.kind != Kind::hello) die(Error{ErrorDomain::fabric, 0, Action::fail, "no hello from the server"});

  std::vector<Row> rows;
  std::vector<double> rtt;
  const auto lat_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < lat_end && rtt.size() < 200000) {
    auto t0 = Clock::now();
    pump.send(Message{Kind::ping, 0, 0, 0, {}});
    Message pong = pump.receive();
    if (pong.kind != Kind::pong) die(Error{ErrorDomain::fabric, 0, Action::fail, "expected a pong"});
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(rtt.begin(), rtt.end());
  rows.push_back({"send/recv round trip", "64 B", 1, rtt[rtt.size() / 2], "us", rtt[rtt.size() * 99 / 100]});
  for (bool write : {true, false}) {
    for (std::size_t block : {std::size_t{64} << 10, std::size_t{1} << 20}) {
      double mibs = rma_bandwidth(*ep, *domain, hello, write, block, depth, seconds);
      rows.push_back({write ? "RMA Write bandwidth" : "RMA Read bandwidth", block == (1u << 20) ? "1 MiB" : "64 KiB",
                      depth, mibs, "MiB/s"});
    }
  }
  for (Kind k : {Kind::call, Kind::wcall}) {
    rows.push_back({k == Kind::call ? "READ-shaped calls" : "WRITE-shaped calls", "4 KiB", std::min(depth, kSlots),
                    call_rate(*ep, *domain, m, k, 4096, depth, seconds), "calls/s"});
  }
  pump.send(Message{Kind::done, 0, 0, 0, {}});

  if (json) {
    nlohmann::json out = {{"provider", provider}, {"peer", peer}, {"results", nlohmann::json::array()}};
    for (const Row& r : rows) {
      nlohmann::json row = {{"test", r.test}, {"size", r.size}, {"depth", r.depth}, {"value", round2(r.value)},
                            {"unit", r.unit}};
      if (r.p99 > 0) row["p99"] = round2(r.p99);
      out["results"].push_back(std::move(row));
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("libfabric provider %s, peer %s:%u, %.1f s per test\n", provider.c_str(), peer.c_str(), port, seconds);
  std::printf("%-22s %8s %6s %14s\n", "test", "size", "depth", "result");
  for (const Row& r : rows) {
    char v[64];
    if (r.p99 > 0) {
      std::snprintf(v, sizeof v, "%.1f us (p99 %.1f)", r.value, r.p99);
    } else {
      std::snprintf(v, sizeof v, "%.0f %s", r.value, r.unit.c_str());
    }
    std::printf("%-22s %8s %6zu %14s\n", r.test.c_str(), r.size.c_str(), r.depth, v);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nfsrdma::fabric::restore_default_signals();
  CLI::App app{"fabric_bench: raw libfabric RMA bandwidth, send/recv latency and READ- and WRITE-shaped call rates (server when no --peer)"};
  std::string provider, peer;
  std::uint16_t port = 20050;
  double seconds = 2;
  std::size_t depth = 16, buffer_mib = 64;
  bool json = false;
  app.add_option("--provider", provider, "tcp, verbs or sockets (default: verbs if present, else tcp)");
  app.add_option("--peer", peer, "Server to measure against; without it, be the server");
  app.add_option("--port", port, "Port")->capture_default_str();
  app.add_option("--seconds", seconds, "Duration of each test")->capture_default_str();
  app.add_option("--depth", depth, "RMA operations in flight")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--buffer-mib", buffer_mib, "Server buffer the client reads and writes")->capture_default_str();
  app.add_flag("--json", json, "Print the results as JSON");
  CLI11_PARSE(app, argc, argv);
  init_logging("warn");
  provider = must(choose_provider(provider));
  return peer.empty() ? run_server(provider, port, buffer_mib << 20) : run_client(provider, peer, port, seconds, depth, json);
}
