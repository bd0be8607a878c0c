#pragma once
// A FIFO on one contiguous vector: push at the back, pop at the front, storage reused once the
// queue drains. Streams push and pop millions of small operations; std::deque allocates a block
// every few pushes, this allocates only while the queue grows past its largest size so far.
#include <cstddef>
#include <vector>

namespace prefetchlab::sim {

template <class T>
class FifoQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  void push_back(const T& item) { items_.push_back(item); }
  void pop_front() {
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();  // keeps capacity
      head_ = 0;
    } else if (head_ >= 1024 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace prefetchlab::sim
