#include "lib/base/mapping.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <utility>

namespace nfsrdma {

Result<Mapping> Mapping::anonymous(std::size_t bytes, bool huge_pages) {
  Mapping m;
  if (bytes == 0) return m;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return sys_error(errno, "mmap of " + std::to_string(bytes) + " bytes");
  if (huge_pages) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: no THP is not an error
  m.data_ = static_cast<std::uint8_t*>(p);
  m.size_ = bytes;
  return m;
}

Mapping::Mapping(Mapping&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace nfsrdma
