// A vector with a fixed capacity and no heap: for decoded wire lists whose
// length is capped by the protocol or by us (chunk lists, segments).
#pragma once

#include <array>
#include <cstddef>

#include "lib/base/result.hpp"

namespace nfsrdma {

template <class T, std::size_t N>
class StaticVector {
 public:
  static constexpr std::size_t capacity() { return N; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == N; }
  void clear() { size_ = 0; }
  // Returns nullptr when full.
  T* push_back(const T& v) {
    if (full()) return nullptr;
    items_[size_] = v;
    return &items_[size_++];
  }
  T& operator[](std::size_t i) {
    NFSRDMA_CHECK(i < size_);
    return items_[i];
  }
  const T& operator[](std::size_t i) const {
    NFSRDMA_CHECK(i < size_);
    return items_[i];
  }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }
  T& back() { return (*this)[size_ - 1]; }

 private:
  std::array<T, N> items_{};
  std::size_t size_ = 0;
};

}  // namespace nfsrdma
