// RFC 8797 connection private data: each side states the largest message it
// will send and can receive inline, in the RDMA connect exchange.
//
//   0  magic 0xf6ab0e18 (big-endian)   4 version (1)   5 flags (bit 0: remote invalidate)
//   6  send size   7 receive size      (each: size in KiB minus 1, so 1 KiB..256 KiB)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace nfsrdma::rpcrdma {

constexpr std::uint32_t kPrivateMagic = 0xf6ab0e18;
// What we offer each way: a 4 KiB READ's reply or WRITE's call in one Send,
// where 4 KiB thresholds took a Send and an RDMA Write or Read round trip.
constexpr std::uint32_t kDefaultInline = 8192;
constexpr std::uint32_t kLegacyInline = 1024;   // what we assume of a peer that says nothing (RFC 8166 §3.3.3)

struct ConnectPrivate {
  std::uint8_t version = 1;
  bool remote_invalidate = false;
  std::uint32_t send_size = kDefaultInline;  // bytes
  std::uint32_t recv_size = kDefaultInline;
  // Decoded only: the data came unframed (the magic's first byte taken as a
  // length by libfabric's verbs provider), so the peer is no libfabric peer and
  // read ours, which that provider frames, as no private data at all.
  bool peer_cannot_read_ours = false;
};

std::array<std::uint8_t, 8> encode_private(const ConnectPrivate& p);

// Reads private data as a provider hands it over. Some libfabric providers put
// a one-byte length in front or pad the buffer; both are accepted, and so is
// what libfabric's verbs provider makes of a kernel peer's data (the magic's
// first byte taken as that length). Nothing (or something without our magic)
// means the peer did not send any.
std::optional<ConnectPrivate> decode_private(std::span<const std::uint8_t> data);

// The most we may send the peer inline: what it receives, within `ours`. A
// peer that said nothing receives 1024 bytes (RFC 8166 §3.3.3); so does one
// that could not read ours, since it sized its receives to the 1024 it then
// assumed we send (RFC 8797 §4: a receiver's buffers match the sender's size).
std::uint32_t peer_receive_inline(const std::optional<ConnectPrivate>& theirs, std::uint32_t ours);

// The most the peer may send us inline (RFC 8166 §3.3.2: the smaller of its
// send size and our receive size), so a reply larger than that is given a
// chunk. A peer that said nothing sends 1024 bytes at most (RFC 8166 §3.3.3).
// One that could not read ours is Linux, whose nfsd sends up to its own send
// size whatever the client said (svcrdma reads only the flags of ours).
std::uint32_t peer_send_inline(const std::optional<ConnectPrivate>& theirs, std::uint32_t ours);

}  // namespace nfsrdma::rpcrdma
