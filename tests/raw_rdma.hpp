// A hand-made RPC-over-RDMA peer, for the hostile tests and the stress abuser.
#pragma once

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "lib/fabric/fabric.hpp"
#include "lib/nfs3/nfs3_procs.hpp"
#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"
#include "tests/server_harness.hpp"

namespace nfsrdma::test {

// A peer speaking hand-made bytes straight over lib/fabric. It exposes one
// region the server may RDMA Read and Write, and polls only when asked to, so
// a test controls whether the server's RDMA to it makes progress.
class RawRdma {
 public:
  static constexpr std::size_t kRecvBytes = 8192, kSends = 32, kSendBytes = 4096, kExposedBytes = 1 << 20;

  explicit RawRdma(std::uint16_t port) : buf_(kRecvBytes + kSends * kSendBytes + kExposedBytes) {
    auto info = fabric::get_info(test_provider(), test_server_host(), std::to_string(port), false);
    if (!info) throw std::runtime_error(info.error().describe());
    info_ = std::move(*info);
    domain_ = fabric::Domain::open(info_.get()).value();
    mr_ = domain_->register_memory(buf_.data(), buf_.size(), true).value();
    std::vector<std::uint8_t> theirs;
    auto priv = rpcrdma::encode_private({});
    auto ep = fabric::Endpoint::connect(*domain_, info_.get(), priv, theirs, 5000, 2 * kSends, false,
                                        [&](fabric::Endpoint& e) { return post_recv(e); });
    if (!ep) throw std::runtime_error(ep.error().describe());
    ep_ = std::move(*ep);
  }
  // Sends `msg` without waiting for anything; up to kSends may be in flight.
  void send(const std::vector<std::uint8_t>& msg) {
    if (msg.size() > kSendBytes) throw std::runtime_error("message too long for a send buffer");
    std::size_t i = sent_++ % kSends;
    std::uint8_t* at = buf_.data() + kRecvBytes + i * kSendBytes;
    std::memcpy(at, msg.data(), msg.size());
    if (!ep_->post_send(&send_ctx_[i], at, msg.size(), mr_.desc())) throw std::runtime_error("send");
  }
  // Sends `msg` and returns the decoded reply header; `body` gets the RPC
  // message after it.
  rpcrdma::Header exchange(const std::vector<std::uint8_t>& msg, std::vector<std::uint8_t>* body = nullptr) {
    send(msg);
    for (int i = 0; i < 50; ++i) {
      fabric::Completion c[4];
      auto n = ep_->poll(c, 100);
      if (!n) throw std::runtime_error(n.error().describe());
      for (std::size_t k = 0; k < *n; ++k) {
        if (c[k].context != &recv_ctx_) continue;
        auto d = rpcrdma::decode_header(std::span(buf_.data(), c[k].len));
        if (body) body->assign(buf_.begin() + static_cast<long>(d.header_bytes), buf_.begin() + static_cast<long>(c[k].len));
        std::memset(buf_.data(), 0, kRecvBytes);
        if (!post_recv(*ep_)) throw std::runtime_error("recv");
        return d.header;
      }
    }
    throw std::runtime_error("no reply");
  }
  // The memory the server may reach, and segments naming parts of it.
  std::span<std::uint8_t> exposed() { return {buf_.data() + kRecvBytes + kSends * kSendBytes, kExposedBytes}; }
  rpcrdma::Segment segment(std::size_t offset, std::uint32_t length) {
    return {mr_.key(), length, mr_.remote_address(exposed().data() + offset)};
  }

 private:
  Result<void> post_recv(fabric::Endpoint& e) { return e.post_recv(&recv_ctx_, buf_.data(), kRecvBytes, mr_.desc()); }

  std::vector<std::uint8_t> buf_;  // receive buffer, send buffers, exposed region
  fabric::Info info_;
  std::unique_ptr<fabric::Domain> domain_;
  fabric::MemoryRegion mr_;
  std::unique_ptr<fabric::Endpoint> ep_;
  fabric::OpContext recv_ctx_{}, send_ctx_[kSends]{};
  std::size_t sent_ = 0;
};

// An RPC-over-RDMA message: the transport header, then the RPC call inline.
inline std::vector<std::uint8_t> message(const rpcrdma::Header& h, const std::vector<std::uint8_t>& rpc_call = {}) {
  std::vector<std::uint8_t> out;
  xdr::Encoder e(out);
  rpcrdma::encode_header(e, h);
  out.insert(out.end(), rpc_call.begin(), rpc_call.end());
  return out;
}

inline rpcrdma::Header call_header(std::uint32_t xid) {
  rpcrdma::Header h;
  h.xid = xid;
  h.credits = 32;
  return h;
}

inline std::vector<std::uint8_t> read_call(std::uint32_t xid, const nfs3::nfs_fh3& fh, std::uint32_t count) {
  std::vector<std::uint8_t> args;
  xdr::encode(args, nfs3::READ3args{fh, 0, count});
  return make_call(xid, nfs3::kProgram, nfs3::kVersion, static_cast<std::uint32_t>(nfs3::Proc::READ), args);
}

// A READ of `count` bytes from offset 0 whose data goes by `chunk`, and its
// reply, which ends at the data's length word. `ok`: an RDMA_MSG returning
// one Write chunk (`placed` bytes in it), the RPC header checked and every
// word there. `nomsg`: the call goes as RDMA_NOMSG, its whole in a
// position-zero Read chunk from the last 4 KiB of the exposed memory.
struct ReducedRead {
  bool ok = false;
  std::uint64_t placed = 0;
  nfs3::nfsstat3 status{};
  std::uint32_t count = 0, length = 0;
  bool eof = false;
  std::size_t left = 0;  // bytes after the length word
};
inline ReducedRead read_by(RawRdma& raw, const rpcrdma::WriteChunk& chunk, std::uint32_t xid, const nfs3::nfs_fh3& fh,
                           std::uint32_t count, bool nomsg = false) {
  rpcrdma::Header h = call_header(xid);
  h.write_list.push_back(chunk);
  std::vector<std::uint8_t> rpc_call = read_call(xid, fh, count), body;
  if (nomsg) {
    const std::size_t at = raw.exposed().size() - 4096;
    std::copy(rpc_call.begin(), rpc_call.end(), raw.exposed().begin() + static_cast<std::ptrdiff_t>(at));
    h.proc = rpcrdma::RDMA_NOMSG;
    h.read_list.push_back({0, raw.segment(at, static_cast<std::uint32_t>(rpc_call.size()))});
    rpc_call.clear();
  }
  const rpcrdma::Header r = raw.exchange(message(h, rpc_call), &body);
  ReducedRead out;
  if (r.proc != rpcrdma::RDMA_MSG || r.write_list.size() != 1) return out;
  out.placed = r.write_list[0].length();
  xdr::Decoder d(body);
  if (!rpc::check_reply(d, xid).ok()) return out;
  nfs3::post_op_attr attrs;
  d.enumeration(out.status);
  xdr::xdr_optional(d, attrs);
  d.u32(out.count);
  d.boolean(out.eof);
  d.u32(out.length);
  out.ok = d.ok();
  out.left = d.remaining();
  return out;
}

}  // namespace nfsrdma::test
