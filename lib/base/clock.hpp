// The monotonic clock as one integer, for times kept in atomics and compared
// across threads.
#pragma once

#include <chrono>
#include <cstdint>

namespace nfsrdma {

inline std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace nfsrdma
