#pragma once
// A FIFO as a growable ring buffer: push at the back, pop at the front, storage reused in a
// circle. Streams push and pop millions of small operations while the host runs ahead of the
// GPU; a ring keeps that working set small and hot in cache (std::deque allocates a block
// every few pushes; a vector with a moving head keeps touching fresh memory).
#include <cstddef>
#include <utility>
#include <vector>

namespace prefetchlab::sim {

template <class T>
class FifoQueue {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  // The i-th item from the front (i < size()).
  const T& at(std::size_t i) const { return items_[(head_ + i) & (items_.size() - 1)]; }
  void push_back(const T& item) {
    if (size_ == items_.size()) grow();
    items_[(head_ + size_) & (items_.size() - 1)] = item;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (items_.size() - 1);
    --size_;
  }

 private:
  void grow() {
    std::vector<T> bigger(items_.empty() ? 16 : 2 * items_.size());  // always a power of two
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(items_[(head_ + i) & (items_.size() - 1)]);
    items_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> items_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace prefetchlab::sim
