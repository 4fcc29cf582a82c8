// A first-in first-out queue in one vector that keeps its room: once its
// length has been reached, pushing and popping allocate nothing (a deque
// allocates a block every few dozen elements, and frees one as often).
// Popped elements are moved out at once; the space they leave is reclaimed
// when the queue empties, or when it is over half the vector.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "lib/base/result.hpp"

namespace nfsrdma {

template <class T>
class Fifo {
 public:
  std::size_t size() const { return items_.size() - head_; }
  bool empty() const { return size() == 0; }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  T& front() {
    NFSRDMA_CHECK(!empty());
    return items_[head_];
  }
  T pop_front() {
    NFSRDMA_CHECK(!empty());
    T out = std::move(items_[head_++]);
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return out;
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }
  // Oldest first.
  auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() { return items_.end(); }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace nfsrdma
