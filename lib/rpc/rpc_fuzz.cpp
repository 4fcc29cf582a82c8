// Fuzzes everything a peer reaches in an RPC message header: call and reply
// headers and AUTH_SYS credentials.
#include "lib/rpc/rpc.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nfsrdma;
  std::span<const std::uint8_t> in(data, size);
  xdr::Decoder d(in);
  if (auto h = rpc::decode_call(d); h.ok()) {
    (void)rpc::decode_auth_sys(h->cred.body);
  }
  xdr::Decoder r(in);
  (void)rpc::decode_reply(r);
  return 0;
}
