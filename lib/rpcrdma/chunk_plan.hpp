// Chunk planning (RFC 8166 §3.4-3.5, RFC 8267 §2): how one NFS call and its
// reply travel, as a pure function of their sizes and the inline thresholds.
//
// Call:  fits inline -> RDMA_MSG, all inline.
//        else, with a DDP-eligible payload (WRITE data, SYMLINK path) whose
//        removal makes it fit -> RDMA_MSG + a Read chunk at the payload's XDR
//        position; the payload's round-up is not sent (§3.4.5.2).
//        else -> RDMA_NOMSG + a position-zero Read chunk carrying the whole call.
// Reply: its largest size fits inline -> no chunk.
//        else, with DDP-eligible results (READ data, READLINK path) whose
//        removal makes the rest fit -> a Write chunk for them alone.
//        else -> a Reply chunk for the whole reply (READDIR, READDIRPLUS, a
//        READ whose rest may not fit). Never a Write and a Reply chunk
//        together, as xprtrdma: Linux nfsd refuses that pair.
#pragma once

#include <cstdint>

#include "lib/rpcrdma/header.hpp"

namespace nfsrdma::rpcrdma {

struct CallShape {
  std::uint32_t call_bytes = 0;       // the whole RPC call, XDR-encoded, payload included (padded)
  std::uint32_t payload_offset = 0;   // XDR position of the DDP-eligible item's data
  std::uint32_t payload_bytes = 0;    // its length (unpadded); 0: none
  std::uint32_t reply_max_bytes = 0;  // the largest reply, payload included
  std::uint32_t reply_payload_max = 0;  // DDP-eligible reply data at most; 0: none
};

struct Plan {
  Proc proc = RDMA_MSG;
  // Read chunk: at `read_position`, `read_bytes` long (0: no Read chunk).
  std::uint32_t read_position = 0;
  std::uint32_t read_bytes = 0;
  std::uint32_t inline_bytes = 0;  // the call bytes sent inline
  std::uint32_t write_bytes = 0;   // Write chunk size (0: none)
  std::uint32_t reply_bytes = 0;   // Reply chunk size (0: none)
};

// `send_inline`: the most we may send inline (the peer's receive size);
// `recv_inline`: the most the peer may send us inline (our receive size).
// The transport header is not counted: the thresholds apply to the whole
// message, so both are reduced by `header_reserve` first. Its default is what
// our plans can add (a one-segment Read chunk in the call, a one-segment Write
// chunk echoed in the reply: 52 bytes each over the 28 of an empty header).
constexpr std::uint32_t kHeaderReserve = 128;
Plan plan_call(const CallShape& shape, std::uint32_t send_inline, std::uint32_t recv_inline,
               std::uint32_t header_reserve = kHeaderReserve);

}  // namespace nfsrdma::rpcrdma
