// The fixture of the RPC-over-RDMA tests: the real nfsrdma-server on
// libfabric's tcp provider, a TCP client for MOUNT (RFC 8267 keeps MOUNT on
// TCP, as a kernel client does) and an RdmaClient for NFS calls.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "lib/transport/rdma/rdma_client.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {

using namespace nfs3;

struct Sizes {
  std::uint32_t reply_max = 0, reply_payload_max = 0;
  bool split_payload = false;  // the last opaque of the arguments is the DDP-eligible item
  std::uint32_t payload_bytes = 0;
};

inline Result<std::vector<std::uint8_t>> rdma_raw(rpc::ClientTransport& t, Proc proc, const std::vector<std::uint8_t>& args,
                                           Sizes sz) {
  std::uint32_t xid = rpc::next_xid();
  // The handler keeps the message: the transport may send it after a timeout here.
  auto held = std::make_shared<std::vector<std::uint8_t>>(make_call(xid, kProgram, kVersion, static_cast<std::uint32_t>(proc), args));
  const std::vector<std::uint8_t>& msg = *held;
  rpc::OutgoingCall call;
  call.xid = xid;
  call.reply_max_bytes = sz.reply_max;
  call.reply_payload_max = sz.reply_payload_max;
  if (sz.split_payload) {
    std::size_t data_at = msg.size() - xdr::pad4(sz.payload_bytes);
    call.message = {std::span(msg).first(data_at), std::span(msg).subspan(data_at, sz.payload_bytes), {}};
  } else {
    call.message = xdr::Parts{msg};
  }
  auto promise = std::make_shared<std::promise<Result<std::vector<std::uint8_t>>>>();
  auto fut = promise->get_future();
  t.call(call, [promise, xid, held](Result<xdr::Parts> reply) {
    if (!reply) return promise->set_value(reply.error());
    xdr::Decoder d(*reply);
    if (auto r = rpc::check_reply(d, xid); !r) return promise->set_value(r.error());
    promise->set_value(d.unread().joined());
  });
  if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Error{ErrorDomain::rpc, ETIMEDOUT, Action::fail, "no reply in 10 s"};
  }
  return fut.get();
}

class OverRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the server needs root (file handles, identities)";
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{dir_.path() + " " + test_client_host() + "(rw,no_root_squash)"},
                                              server_args());
    Client tcp(*server_);
    root_ = tcp.mount_root(dir_.path());
    rdma::RdmaClientOptions o;
    o.provider = test_provider();
    o.inline_bytes = client_inline();
    auto c = rdma::RdmaClient::connect(test_server_host(), server_->rdma_port(), o);
    ASSERT_TRUE(c.ok()) << c.error().describe() << "\n" << server_->log();
    rdma_ = std::move(*c);
  }
  void TearDown() override {
    if (rdma_) rdma_->shutdown();
    if (server_ && HasFailure()) std::cerr << "server log:\n" << server_->log();
  }

  // A short RMA deadline, so hostile chunks are dealt with within the test.
  virtual std::vector<std::string> server_args() const { return {"--rdma-timeout", "1"}; }
  // What the client offers and sends inline.
  virtual std::uint32_t client_inline() const { return rpcrdma::kDefaultInline; }

  template <class Res, class Args>
  Res call(Proc proc, const Args& args, Sizes sz = {}) {
    std::vector<std::uint8_t> a;
    xdr::encode(a, args);
    auto bytes = rdma_raw(*rdma_, proc, a, sz);
    if (!bytes) throw std::runtime_error(bytes.error().describe());
    replies_.push_back(std::move(*bytes));
    Res r;
    if (auto d = xdr::decode(replies_.back(), r); !d) throw std::runtime_error(d.error().describe());
    return r;
  }

  // A second client whose replies wait for its progress().
  std::unique_ptr<rdma::RdmaClient> caller_progress_client() {
    rdma::RdmaClientOptions o;
    o.provider = test_provider();
    o.caller_progress = true;
    auto c = rdma::RdmaClient::connect(test_server_host(), server_->rdma_port(), o);
    if (!c) throw std::runtime_error(c.error().describe());
    return std::move(*c);
  }

  // A file written straight into the export, and its handle.
  nfs_fh3 file_with(const std::string& name, const std::string& data) {
    std::ofstream(dir_.path() + "/" + name, std::ios::binary) << data;
    auto r = call<LOOKUP3res>(Proc::LOOKUP, diropargs3{root_, name});
    if (r.status != NFS3_OK) throw std::runtime_error("LOOKUP " + name + " failed");
    return r.object;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<rdma::RdmaClient> rdma_;
  nfs_fh3 root_;
  std::vector<std::vector<std::uint8_t>> replies_;
};

}  // namespace nfsrdma::test
