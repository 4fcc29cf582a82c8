// For codec tests (GoogleTest): encode a value, and check that every prefix
// of a golden encoding fails to decode.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "lib/xdr/xdr.hpp"

namespace nfsrdma::xdr::testing {

using Bytes = std::vector<std::uint8_t>;

template <class T>
Bytes enc(const T& v) {
  Bytes out;
  xdr::encode(out, v);
  return out;
}

template <class T>
void expect_truncations_fail(const Bytes& golden) {
  for (std::size_t n = 0; n < golden.size(); ++n) {
    T v;
    Bytes cut(golden.begin(), golden.begin() + static_cast<long>(n));
    EXPECT_FALSE(xdr::decode(cut, v).ok()) << "prefix of " << n << " bytes decoded";
  }
}

}  // namespace nfsrdma::xdr::testing
