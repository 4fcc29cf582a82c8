// Fuzzes the RPC-over-RDMA header and chunk-list decoder, the call validator and
// the RFC 8797 private data decoder. A header that decodes must re-encode to the
// bytes it came from.
#include <cstdlib>
#include <cstring>

#include "lib/rpcrdma/header.hpp"
#include "lib/rpcrdma/private_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nfsrdma::rpcrdma;
  std::span<const std::uint8_t> in(data, size);
  (void)decode_private(in);
  Decoded d = decode_header(in);
  if (d.failure != DecodeFailure::none) return 0;
  (void)validate_call(d.header, Limits{});
  std::vector<std::uint8_t> out;
  nfsrdma::xdr::Encoder e(out);
  encode_header(e, d.header);
  if (out.size() != d.header_bytes || std::memcmp(out.data(), data, out.size()) != 0) std::abort();
  return 0;
}
