// Anonymous memory straight from the kernel, for buffers RDMA registers:
// page-aligned, so a registration pins (and a provider's MADV_DONTFORK marks)
// no page shared with the heap, and given back to the system when freed,
// where a heap would keep it after the connection that used it is gone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/base/result.hpp"

namespace nfsrdma {

class Mapping {
 public:
  // `huge_pages`: ask for transparent huge pages (large, long-lived pools).
  static Result<Mapping> anonymous(std::size_t bytes, bool huge_pages = false);
  Mapping() = default;
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  ~Mapping();

  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace nfsrdma
