// Fuzzes the record-marking reassembler with the input split at a data-chosen step.
#include <algorithm>
#include <cstring>

#include "lib/transport/tcp/record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::size_t step = data[0] % 17 + 1;
  nfsrdma::tcp::RecordReader r(64 * 1024);
  std::size_t at = 1;
  while (at < size) {
    auto buf = r.buffer();
    std::size_t n = std::min({buf.size(), step, size - at});
    std::memcpy(buf.data(), data + at, n);
    at += n;
    r.commit(n);
    for (;;) {
      auto done = r.parse();
      if (!done) return 0;
      if (!*done) break;
      (void)r.take();
    }
  }
  return 0;
}
