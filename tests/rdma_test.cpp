// NFSv3 over RPC-over-RDMA end to end, through the data path: inline calls
// and replies, Read, Write and Reply chunks, RDMA_NOMSG, credits, and caller
// memory that moves without copies. Hostile peers: rdma_hostile_test.cpp.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "tests/rdma_fixture.hpp"

namespace nfsrdma::test {
namespace {

TEST_F(OverRdma, NullAndGetattr) {
  EXPECT_EQ(rdma_->credits(), 1u);  // RFC 8166 §3.3.1: one call until the server grants more
  auto n = rdma_raw(*rdma_, Proc::NULL_, {}, {});
  ASSERT_TRUE(n.ok()) << n.error().describe();
  EXPECT_EQ(rdma_->credits(), 8u);  // a new connection's grant: it grows with use
  auto g = call<GETATTR3res>(Proc::GETATTR, FhArgs{root_});
  ASSERT_EQ(g.status, NFS3_OK);
  EXPECT_EQ(g.obj_attributes.type, NF3DIR);
  EXPECT_EQ(rdma_->peer_inline_receive(), 8192u);
}

// A connection starts with 8 credits, so an idle one holds the buffers of 8
// calls; while a quarter are in use the grant doubles, to the server's --credits.
TEST_F(OverRdma, CreditsGrowWithUseToTheServersGrant) {
  ASSERT_TRUE(rdma_raw(*rdma_, Proc::NULL_, {}, {}).ok());
  EXPECT_EQ(rdma_->credits(), 8u);
  for (int round = 0; round < 20 && rdma_->credits() < 128; ++round) {
    auto left = std::make_shared<std::atomic<int>>(200);
    auto done = std::make_shared<std::promise<void>>();
    for (int i = 0; i < 200; ++i) {
      std::uint32_t xid = rpc::next_xid();
      // Each message lives until its reply: it may wait for credits.
      auto msg = std::make_shared<std::vector<std::uint8_t>>(
          make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::NULL_), {}));
      rpc::OutgoingCall c;
      c.xid = xid;
      c.message = xdr::Parts{*msg};
      rdma_->call(c, [left, done, msg](Result<xdr::Parts>) {
        if (--*left == 0) done->set_value();
      });
    }
    ASSERT_EQ(done->get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  }
  EXPECT_EQ(rdma_->credits(), 128u);
}

TEST_F(OverRdma, OneMebibyteWriteByReadChunkAndReadByWriteChunk) {
  CREATE3args c;
  c.where = {root_, "big"};
  c.obj_attributes.mode = 0644;
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 65536);
  WRITE3args w{*cr.obj, 0, 1u << 20, stable_how::FILE_SYNC,
               {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}};
  auto wr = call<WRITE3res>(Proc::WRITE, w, {0, 0, true, 1u << 20});
  ASSERT_EQ(wr.status, NFS3_OK);
  EXPECT_EQ(wr.count, 1u << 20);
  std::ifstream disk(dir_.path() + "/big", std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(disk)), {});
  EXPECT_TRUE(on_disk == data) << "data written over RDMA differs on disk";
  auto rd = call<READ3res>(Proc::READ, READ3args{*cr.obj, 0, 1u << 20}, {(1u << 20) + 256, 1u << 20});
  ASSERT_EQ(rd.status, NFS3_OK);
  EXPECT_EQ(rd.count, 1u << 20);
  EXPECT_TRUE(rd.eof);
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(rd.data.data()), rd.data.size()) == data);
  // A short read: the server fills less of the Write chunk than offered.
  auto tail = call<READ3res>(Proc::READ, READ3args{*cr.obj, (1u << 20) - 10, 16384}, {16384 + 256, 16384});
  ASSERT_EQ(tail.status, NFS3_OK);
  EXPECT_EQ(tail.count, 10u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(tail.data.data()), tail.data.size()), data.substr(data.size() - 10));
  // At end of file the Write chunk goes unused and comes back with length 0.
  auto past = call<READ3res>(Proc::READ, READ3args{*cr.obj, 2u << 20, 16384}, {16384 + 256, 16384});
  ASSERT_EQ(past.status, NFS3_OK);
  EXPECT_EQ(past.count, 0u);
  EXPECT_TRUE(past.eof);
}

TEST_F(OverRdma, ReplyChunkTooSmallIsErrChunkNeverATruncatedReply) {
  for (int i = 0; i < 2000; ++i) std::ofstream(dir_.path() + "/entry-with-a-longish-name-" + std::to_string(i));
  std::vector<std::uint8_t> args;
  xdr::encode(args, READDIR3args{root_, 0, {}, 65536});
  auto r = rdma_raw(*rdma_, Proc::READDIR, args, {8192, 0});  // offers 8 KiB for up to 64 KiB
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ERR_CHUNK"), std::string::npos) << r.error().message;
  EXPECT_EQ(call<GETATTR3res>(Proc::GETATTR, FhArgs{root_}).status, NFS3_OK);  // the connection lives on
}

TEST_F(OverRdma, ReaddirOf5000EntriesThroughTheReplyChunk) {
  std::filesystem::create_directory(dir_.path() + "/many");
  for (int i = 0; i < 5000; ++i) std::ofstream(dir_.path() + "/many/file-" + std::to_string(i));
  Client tcp(*server_);
  nfs_fh3 dir = tcp.lookup(root_, "many");
  std::set<std::string> seen;
  READDIR3args a{dir, 0, {}, 65536};
  int rounds = 0;
  for (;;) {
    auto r = call<READDIR3res>(Proc::READDIR, a, {65536 + 1024, 0});  // count bounds READDIR3res; the RPC header comes on top
    ASSERT_EQ(r.status, NFS3_OK);
    for (const auto& e : r.entries) seen.insert(e.name);
    ++rounds;
    if (r.eof) break;
    a.cookie = r.entries.back().cookie;
    a.cookieverf = r.cookieverf;
  }
  EXPECT_EQ(seen.size(), 5002u);
  EXPECT_LT(rounds, 10);  // 64 KiB replies: far over the inline threshold
}

// No NFS call goes past 8 KiB without a payload: a client offering 4 KiB.
class OverRdmaAtFourKiB : public OverRdma {
 protected:
  std::uint32_t client_inline() const override { return 4096; }
};

TEST_F(OverRdmaAtFourKiB, CallOverTheInlineThresholdGoesAsNomsg) {
  std::string target(4000, 'x');
  SYMLINK3args s;
  s.where = {root_, "long-link"};
  s.symlink_data = target;
  auto r = call<CreateRes>(Proc::SYMLINK, s);  // ~4.1 KiB of arguments, no DDP payload
  ASSERT_EQ(r.status, NFS3_OK);
  auto rl = call<READLINK3res>(Proc::READLINK, FhArgs{*r.obj}, {8192, 0});
  ASSERT_EQ(rl.status, NFS3_OK);
  EXPECT_EQ(rl.data, target);
  EXPECT_EQ(std::filesystem::read_symlink(dir_.path() + "/long-link").string(), target);
}

TEST_F(OverRdma, ManyCallsStayWithinTheGrantedCredits) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, FhArgs{root_});
  std::mutex mu;
  std::condition_variable cv;
  int left = 300, failures = 0;
  for (int i = 0; i < 300; ++i) {
    std::uint32_t xid = rpc::next_xid();
    // Each message lives until its reply: it may wait for credits.
    auto msg = std::make_shared<std::vector<std::uint8_t>>(make_call(xid, kProgram, kVersion, 1, args));
    rpc::OutgoingCall c;
    c.xid = xid;
    c.message = xdr::Parts{*msg};
    rdma_->call(c, [&, xid, msg](Result<xdr::Parts> reply) {
      bool ok = reply.ok();
      if (ok) {
        xdr::Decoder d(*reply);
        GETATTR3res g;
        ok = rpc::check_reply(d, xid).ok() && xdr::decode(d, g).ok() && g.status == NFS3_OK;
      }
      std::lock_guard lk(mu);
      if (!ok) ++failures;
      if (--left == 0) cv.notify_all();
    });
  }
  std::unique_lock lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return left == 0; }));
  EXPECT_EQ(failures, 0);
  EXPECT_LE(rdma_->max_in_flight_seen(), 128u);
  EXPECT_GT(rdma_->max_in_flight_seen(), 1u);
}

// Caller memory registered once: WRITE data goes out as a Read chunk pointing
// at it and READ data lands in it by RDMA Write; no bounce buffer is touched.
TEST_F(OverRdma, RegisteredCallerMemoryMovesWithoutCopies) {
  std::vector<std::uint8_t> region(2 << 20);
  ASSERT_TRUE(rdma_->register_memory(region).ok());
  auto src = std::span(region).first(1 << 20);
  auto dst = std::span(region).subspan(1 << 20);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 5 + 1);
  CREATE3args c;
  c.where = {root_, "zc"};
  auto cr = call<CreateRes>(Proc::CREATE, c);
  ASSERT_EQ(cr.status, NFS3_OK);
  const std::uint64_t bounce_before = rdma_->bounce_bytes();
  // WRITE: header and arguments up to the data's length word, then the data in place.
  std::vector<std::uint8_t> head;
  xdr::Encoder e(head);
  std::uint32_t xid = rpc::next_xid();
  rpc::AuthSys root;
  rpc::encode_call_header(e, xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::WRITE), root);
  codec(e, *cr.obj);
  e.u64(0);
  e.u32(1u << 20);
  e.enumeration(stable_how::FILE_SYNC);
  e.u32(1u << 20);
  rpc::OutgoingCall w;
  w.xid = xid;
  w.message = {head, src, {}};
  auto wrote = std::make_shared<std::promise<bool>>();
  rdma_->call(w, [wrote, xid](Result<xdr::Parts> r) {
    xdr::Decoder d(r ? *r : xdr::Parts{});
    WRITE3res res;
    wrote->set_value(r.ok() && rpc::check_reply(d, xid).ok() && xdr::decode(d, res).ok() && res.status == NFS3_OK);
  });
  ASSERT_TRUE(wrote->get_future().get());
  // READ into the other half of the region.
  std::vector<std::uint8_t> args;
  xdr::encode(args, READ3args{*cr.obj, 0, 1u << 20});
  std::uint32_t rxid = rpc::next_xid();
  auto msg = make_call(rxid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::READ), args);
  rpc::OutgoingCall r;
  r.xid = rxid;
  r.message = xdr::Parts{msg};
  r.reply_max_bytes = (1u << 20) + 1024;
  r.reply_payload_max = 1u << 20;
  r.reply_payload = dst;
  auto read = std::make_shared<std::promise<std::pair<std::uint32_t, std::size_t>>>();
  rdma_->call(r, [read, rxid, dst](Result<xdr::Parts> reply) {
    // The reply is split: status, attributes, count, eof and length inline,
    // the data its payload, where it was placed.
    xdr::Decoder d(reply ? *reply : xdr::Parts{});
    const bool placed = reply && reply->payload.data() == dst.data();
    nfsstat3 st{};
    post_op_attr attrs;
    std::uint32_t count = 0, len = 0;
    bool eof = false;
    if (reply && rpc::check_reply(d, rxid).ok()) {
      std::span<const std::uint8_t> data;
      d.enumeration(st);
      xdr::xdr_optional(d, attrs);
      d.u32(count);
      d.boolean(eof);
      d.opaque_view(data, 1u << 20);
      len = placed ? static_cast<std::uint32_t>(data.size()) : 0;
    }
    read->set_value({d.ok() && st == NFS3_OK ? len : 0, d.remaining()});
  });
  auto [len, left] = read->get_future().get();
  EXPECT_EQ(len, 1u << 20);
  EXPECT_EQ(left, 0u);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  EXPECT_EQ(rdma_->bounce_bytes(), bounce_before);  // nothing went through a bounce buffer
}

// Calls one at a time from a client that reaps its own completions: a reply
// is one completion, and the Sends complete one in kSendBatch (each Send's
// completion would wake a client's progress thread a second time per call).
// The send buffers come back in the signalled Sends' completions: 1,000
// calls are many times the pool, so a buffer lost would stop the calls.
TEST_F(OverRdma, SendsCompleteOneInABatch) {
  auto c = caller_progress_client();
  auto& client = *c;
  constexpr std::size_t kCalls = 1000;
  std::size_t completions = 0;
  for (std::size_t i = 0; i < kCalls; ++i) {
    const std::uint32_t xid = rpc::next_xid();
    auto msg = make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::NULL_), {});
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{msg};
    auto answer = std::make_shared<std::optional<bool>>();  // outlives the loop if the shutdown fails it
    client.call(call, [answer](Result<xdr::Parts> r) { *answer = r.ok(); });
    for (int tries = 0; !*answer && tries < 100; ++tries) {
      auto n = client.progress(100);
      ASSERT_TRUE(n.ok()) << n.error().describe();
      completions += *n;
    }
    ASSERT_TRUE(answer->value_or(false)) << "call " << i;
  }
  // The last batch's signalled Send may complete after the last reply.
  EXPECT_LE(completions, kCalls + kCalls / rdma::kSendBatch + 1);
  EXPECT_GE(completions, kCalls + kCalls / rdma::kSendBatch - 1);
  client.shutdown();
}

// A call on a connection whose server went away is the connection's
// failure, never the call's own: the caller is told to go again on a new
// connection (Action::reconnect), so a hard mount loses no WRITE. Here the
// calls fail as their completions or the connection's end come; a Send
// refused when posted is classed in fabric::post_result (fabric_test).
TEST_F(OverRdma, CallsOnAConnectionWhoseServerWentAwayAreToldToReconnect) {
  auto c = caller_progress_client();
  auto& client = *c;
  server_->kill_hard();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  constexpr int kCalls = 40;
  std::vector<std::optional<Error>> errors(kCalls);
  std::vector<std::vector<std::uint8_t>> msgs;
  for (int i = 0; i < kCalls; ++i) {
    const std::uint32_t xid = rpc::next_xid();
    msgs.push_back(make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::NULL_), {}));
    rpc::OutgoingCall call;
    call.xid = xid;
    call.message = xdr::Parts{msgs.back()};
    client.call(call, [&errors, i](Result<xdr::Parts> r) {
      if (!r) errors[i] = r.error();
    });
  }
  for (int tries = 0; tries < 50; ++tries) {
    if (!client.progress(100)) break;
  }
  client.shutdown();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(errors[i].has_value()) << "call " << i << " was answered by a dead server";
    EXPECT_EQ(errors[i]->action, Action::reconnect) << "call " << i << ": " << errors[i]->describe();
  }
}

TEST_F(OverRdma, AConnectionPollsOnlyWhileBusyThenSleeps) {
  // Calls one at a time: the server polls between them (--poll-us)...
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(rdma_raw(*rdma_, Proc::NULL_, {}, {}).ok());
  // ...and once they stop, it sleeps: an idle server takes no CPU.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double t0 = cpu_seconds(server_->pid());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle = cpu_seconds(server_->pid()) - t0;
  EXPECT_LT(idle, 0.05) << "CPU-seconds taken by an idle server in one second";
}

// The server polls only while polling pays (PollScore, whose unit test
// drives the rule): calls 10 ms apart, an application and the FUSE daemon
// between them, are polled for only now and then, so the server leaves the
// cores to them. A window of 2 ms, so that the test means the same under an
// emulated CPU (the guest's verbs). How often calls one at a time keep a loop
// polling depends on how busy the machine is: a benchmark's question
// (nfs_bench --depth 1), not a test's.
class OverRdmaCountingPolls : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override {
    return {"--rdma-timeout", "1", "--poll-us", "2000", "--metrics", "127.0.0.1:" + std::to_string(metrics_port_)};
  }
  double polls() const {
    const std::string scraped = scrape(metrics_port_);
    return metric(scraped, "nfsrdma_server_rdma_polls_total{result=\"work\"}") +
           metric(scraped, "nfsrdma_server_rdma_polls_total{result=\"slept\"}");
  }
  std::uint16_t metrics_port_ = free_port();
};

TEST_F(OverRdmaCountingPolls, TheServerPollsOnlyForCallsThatComeCloseTogether) {
  // Calls one at a time first, so that polling may have been paying.
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(rdma_raw(*rdma_, Proc::NULL_, {}, {}).ok());
  const double close_together = polls();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(rdma_raw(*rdma_, Proc::NULL_, {}, {}).ok());
  }
  // A few while polling stops paying (misses count twice hits), then the
  // probes (one spell in 32); a poller that never learnt would take 100.
  EXPECT_LE(polls() - close_together, 12) << "idle spells polled through among 100 calls 10 ms apart";
}

class OverRdmaOneLoop : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override { return {"--rdma-timeout", "1", "--loops", "1"}; }
};

// Connections share the event loops: twelve clients calling at once, one of
// them flooding the server with pipelined calls, all get their replies from
// the one loop, which also serves TCP, and no connection brings a thread of
// its own.
TEST_F(OverRdmaOneLoop, ConnectionsShareTheEventLoops) {
  const auto before = thread_names(server_->pid(), "loop-", 1);
  EXPECT_EQ(before.count("loop-0"), 1u);
  for (const auto& name : before) {
    EXPECT_FALSE(name.starts_with("tcp-loop") || name.starts_with("rdma-loop")) << name << ": a loop for one transport";
  }
  std::vector<std::unique_ptr<rdma::RdmaClient>> clients;
  for (int i = 0; i < 12; ++i) {
    rdma::RdmaClientOptions o;
    o.provider = test_provider();
    auto c = rdma::RdmaClient::connect(test_server_host(), server_->rdma_port(), o);
    ASSERT_TRUE(c.ok()) << c.error().describe();
    clients.push_back(std::move(*c));
  }
  std::atomic<bool> flooding{true};
  std::atomic<int> flood_replies{0};
  std::thread flood([&] {
    // Up to 64 calls in flight on the first connection until the others are done.
    auto in_flight = std::make_shared<std::atomic<int>>(0);
    while (flooding) {
      if (*in_flight >= 64) {
        std::this_thread::yield();
        continue;
      }
      const std::uint32_t xid = rpc::next_xid();
      // Each call's message lives until its reply: it may wait for credits.
      auto msg = std::make_shared<std::vector<std::uint8_t>>(
          make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(Proc::NULL_), {}));
      rpc::OutgoingCall call;
      call.xid = xid;
      call.message = xdr::Parts{*msg};
      ++*in_flight;
      clients[0]->call(call, [in_flight, &flood_replies, msg](Result<xdr::Parts> r) {
        if (r) ++flood_replies;
        --*in_flight;
      });
    }
    while (*in_flight > 0) std::this_thread::yield();
  });
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (std::size_t i = 1; i < clients.size(); ++i) {
    callers.emplace_back([&, i] {
      for (int n = 0; n < 100; ++n) {
        if (rdma_raw(*clients[i], Proc::NULL_, {}, {}).ok()) ++ok;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto during = thread_names(server_->pid());
  for (auto& t : callers) t.join();
  flooding = false;
  flood.join();
  EXPECT_EQ(ok.load(), 11 * 100);
  EXPECT_GT(flood_replies.load(), 0);
  EXPECT_EQ(during, before) << "threads while 13 connections were open";
  for (auto& c : clients) c->shutdown();
}

class OverRdmaTwoLoops : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override { return {"--rdma-timeout", "1", "--loops", "2"}; }
};

// The event loop each connection was given, in the order the server logged
// them: "tcp" or "rdma", and the loop's index.
std::vector<std::pair<std::string, int>> loops_given(const std::string& log) {
  static const std::regex given(R"((tcp|rdma): connection from \S+ on event loop (\d+))");
  std::vector<std::pair<std::string, int>> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), given); it != std::sregex_iterator(); ++it) {
    out.emplace_back((*it)[1], std::stoi((*it)[2]));
  }
  return out;
}

// The two transports share the loops, and so their count of connections: a
// TCP connection made while one RPC-RDMA connection is open goes to the other
// loop, not to the loop with the fewest TCP connections, which would be the
// busy one (each transport counting its own put both first connections on
// loop 0, and the other loop idled).
TEST_F(OverRdmaTwoLoops, ANewConnectionGoesToTheLoopWithTheFewestOfEitherTransport) {
  int rdma_loop = -1;
  for (int i = 0; i < 500 && rdma_loop < 0; ++i) {
    for (const auto& [transport, loop] : loops_given(server_->log())) {
      if (transport == "rdma") rdma_loop = loop;
    }
    if (rdma_loop < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(rdma_loop, 0) << "the RPC-RDMA connection's loop is not in the log";
  // The fixture's TCP connection (MOUNT, at set-up) has closed by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::size_t before = loops_given(server_->log()).size();
  Fd fd = connect_raw(test_server_host(), server_->nfs_port(), {.source = test_client_host()});
  ASSERT_TRUE(fd.valid());
  const auto call = record(make_call(7, kProgram, kVersion, static_cast<std::uint32_t>(Proc::NULL_), {}));
  ASSERT_EQ(::write(fd.get(), call.data(), call.size()), static_cast<ssize_t>(call.size()));
  char reply[256];
  ASSERT_GT(::read(fd.get(), reply, sizeof reply), 0) << "no answer to a NULL over TCP";
  const auto given = loops_given(server_->log());
  ASSERT_GT(given.size(), before);
  EXPECT_EQ(given.back().first, "tcp");
  EXPECT_NE(given.back().second, rdma_loop) << "the TCP connection went to the RPC-RDMA connection's loop";
}

// A send queue of 4 entries, on purpose: 16 READs and 16 WRITEs of 256 KiB
// at once need far more (an RDMA Write or Read each, and a Send). A full send
// queue is a wait, as running out of credits or buffers is, never a closed
// connection: every call is answered with the right data, and the server
// counts the waits.
class OverRdmaSmallSendQueue : public OverRdma {
 protected:
  std::vector<std::string> server_args() const override {
    return {"--rdma-timeout", "5", "--rdma-send-queue", "4", "--metrics", "127.0.0.1:" + std::to_string(metrics_port_)};
  }
  std::uint16_t metrics_port_ = free_port();
};

TEST_F(OverRdmaSmallSendQueue, AFullSendQueueIsAWaitNotADisconnect) {
  constexpr std::uint32_t kBlock = 256 * 1024;
  constexpr int kFiles = 16;
  std::vector<nfs_fh3> files;
  std::vector<std::string> data;
  for (int i = 0; i < kFiles; ++i) {
    data.emplace_back(kBlock, static_cast<char>('a' + i));
    files.push_back(file_with("sq" + std::to_string(i), std::string(kBlock, 'z')));
  }
  for (int round = 0; round < 4; ++round) {
    std::vector<std::future<std::string>> done;  // empty, or what went wrong
    for (int i = 0; i < kFiles; ++i) {
      done.push_back(std::async(std::launch::async, [&, i]() -> std::string {
        WRITE3args w{files[i], 0, kBlock, stable_how::UNSTABLE,
                     {reinterpret_cast<const std::uint8_t*>(data[i].data()), data[i].size()}};
        std::vector<std::uint8_t> a;
        xdr::encode(a, w);
        auto wr = rdma_raw(*rdma_, Proc::WRITE, a, {0, 0, true, kBlock});
        if (!wr) return "WRITE: " + wr.error().describe();
        std::vector<std::uint8_t> ra;
        xdr::encode(ra, READ3args{files[(i + 1) % kFiles], 0, kBlock});
        auto rd = rdma_raw(*rdma_, Proc::READ, ra, {kBlock + 256, kBlock});
        if (!rd) return "READ: " + rd.error().describe();
        READ3res r;
        if (!xdr::decode(*rd, r).ok() || r.status != NFS3_OK || r.count != kBlock) return "READ: a bad reply";
        return {};
      }));
    }
    for (auto& f : done) EXPECT_EQ(f.get(), "") << "in round " << round;
  }
  for (int i = 0; i < kFiles; ++i) {
    std::ifstream disk(dir_.path() + "/sq" + std::to_string(i), std::ios::binary);
    std::string on_disk((std::istreambuf_iterator<char>(disk)), {});
    EXPECT_TRUE(on_disk == data[i]) << "file " << i;
  }
  EXPECT_EQ(server_->log().find("closing"), std::string::npos) << server_->log();
  const double waits = metric(scrape(metrics_port_), "nfsrdma_server_rdma_send_queue_waits_total");
  std::printf("send queue of 4: %.0f waits for room\n", waits);
  EXPECT_GT(waits, 0);
}

}  // namespace
}  // namespace nfsrdma::test
