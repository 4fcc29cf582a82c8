// Fuzzes the RPC-over-RDMA header and chunk-list decoder, the call validator,
// the requester's reply reader and the RFC 8797 private data decoder. A header
// that decodes must re-encode to the bytes it came from, and a reply read as
// sound must lie within the input and the chunks its call offered.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/marshal.hpp"
#include "lib/rpcrdma/private_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nfsrdma::rpcrdma;
  std::span<const std::uint8_t> in(data, size);
  (void)decode_private(in);
  Decoded d = decode_header(in);
  // Offers that the reply's own chunks match, the Write offer cut by the last byte.
  Offers offered = offers_of(d.header);
  if (offered.write && size > 0) offered.write->length -= std::min<std::uint32_t>(offered.write->length, data[size - 1]);
  const ReplyLayout r = read_reply(d, offered);
  if (r.fault == ReplyFault::none) {
    const bool sound = r.in_reply_chunk
                           ? offered.reply && r.reply_bytes <= offered.reply->length
                           : r.inline_from <= size && r.write_bytes <= (offered.write ? offered.write->length : 0);
    if (!sound) std::abort();
  }
  if (d.failure != DecodeFailure::none) return 0;
  (void)validate_call(d.header, Limits{});
  std::vector<std::uint8_t> out;
  nfsrdma::xdr::Encoder e(out);
  encode_header(e, d.header);
  if (out.size() != d.header_bytes || std::memcmp(out.data(), data, out.size()) != 0) std::abort();
  return 0;
}
