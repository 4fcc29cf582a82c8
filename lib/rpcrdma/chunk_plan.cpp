#include "lib/rpcrdma/chunk_plan.hpp"

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::rpcrdma {

Plan plan_call(const CallShape& s, std::uint32_t send_inline, std::uint32_t recv_inline,
               std::uint32_t header_reserve) {
  Plan p;
  const std::uint32_t send_room = send_inline > header_reserve ? send_inline - header_reserve : 0;
  const std::uint32_t recv_room = recv_inline > header_reserve ? recv_inline - header_reserve : 0;

  const auto padded_payload = static_cast<std::uint32_t>(xdr::pad4(s.payload_bytes));
  if (s.call_bytes <= send_room) {
    p.inline_bytes = s.call_bytes;
  } else if (s.payload_bytes > 0 && s.call_bytes - padded_payload <= send_room) {
    p.read_position = s.payload_offset;
    p.read_bytes = s.payload_bytes;
    p.inline_bytes = s.call_bytes - padded_payload;
  } else {
    p.proc = RDMA_NOMSG;
    p.read_position = 0;
    p.read_bytes = s.call_bytes;
    p.inline_bytes = 0;
  }

  // As xprtrdma: a Write chunk alone when the rest of the reply fits inline,
  // else one Reply chunk for all of it. Never both: Linux nfsd (6.1) fails a
  // call that offers both with E2BIG and drops the connection.
  if (s.reply_max_bytes > recv_room) {
    const auto padded = static_cast<std::uint32_t>(xdr::pad4(s.reply_payload_max));
    const std::uint32_t rest = s.reply_max_bytes > padded ? s.reply_max_bytes - padded : 0;
    if (s.reply_payload_max > 0 && rest <= recv_room) {
      p.write_bytes = s.reply_payload_max;
    } else {
      p.reply_bytes = s.reply_max_bytes;
    }
  }
  return p;
}

}  // namespace nfsrdma::rpcrdma
