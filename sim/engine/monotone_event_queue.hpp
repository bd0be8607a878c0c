#pragma once
// The pending-event set of the event engine: a radix heap (Ahuja, Mehlhorn, Orlin & Tarjan,
// "Faster algorithms for the shortest path problem", JACM 1990), which works because simulated
// time never goes back — every key pushed is >= the key last popped.
//
// Bucket b holds the events whose time differs from the last popped time `last_` first in bit
// b-1 (bucket 0: time == last_). A push is one xor and one bit count; a pop takes bucket 0's
// front or, when it is empty, moves the lowest non-empty bucket's events into lower buckets
// around its minimum. An event moves down at most 64 times in its life, in practice a few:
// a binary heap of ~100 pending events costs ~2 x 7 comparisons and scattered swaps per event.
//
// Order: (time, insertion order), exactly as a heap on (time, sequence number) would give,
// without storing a sequence number. Within a bucket events stay in insertion order: a push
// appends the newest event, and a redistribution scans one bucket in order into buckets that
// are all empty (every bucket below the lowest non-empty one is). Bucket 0 is popped from the
// front, so equal times come out first-in, first-out.
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "sim/engine/fifo_queue.hpp"

namespace prefetchlab::sim {

template <class Item>  // Item has a std::int64_t `time_ns`
class MonotoneEventQueue {
 public:
  bool empty() const { return now_bucket_.empty() && nonempty_ == 0; }
  std::size_t size() const {
    std::size_t n = now_bucket_.size();
    for (const auto& bucket : buckets_) n += bucket.size();
    return n;
  }
  // The time of the last pop: pushes must not be earlier (the caller checks).
  std::int64_t last_time_ns() const { return last_ns_; }
  // The earliest item's time without popping it (nor moving anything, so pushes at any time
  // from last_time_ns() on stay valid); the queue must not be empty.
  std::int64_t min_time_ns() const {
    if (!now_bucket_.empty()) return last_ns_;
    const std::vector<Item>& lowest = buckets_[static_cast<std::size_t>(std::countr_zero(nonempty_))];
    std::int64_t min_ns = lowest.front().time_ns;
    for (const Item& item : lowest) min_ns = item.time_ns < min_ns ? item.time_ns : min_ns;
    return min_ns;
  }

  void push(const Item& item) {
    const int b = bucket_of(item.time_ns);
    if (b == 0) {
      now_bucket_.push_back(item);
      return;
    }
    buckets_[static_cast<std::size_t>(b - 1)].push_back(item);
    nonempty_ |= std::uint64_t{1} << (b - 1);
  }

  // The earliest item (first pushed among equal times); the queue must not be empty.
  Item pop() {
    if (now_bucket_.empty()) refill_now_bucket();
    const Item item = now_bucket_.front();
    now_bucket_.pop_front();
    return item;
  }

 private:
  int bucket_of(std::int64_t time_ns) const {
    return static_cast<int>(std::bit_width(static_cast<std::uint64_t>(time_ns ^ last_ns_)));
  }

  // Moves the lowest non-empty bucket down around its minimum; the minimum's events land in
  // the (empty) bucket 0 in insertion order.
  void refill_now_bucket() {
    const int lowest = std::countr_zero(nonempty_);
    std::vector<Item>& source = buckets_[static_cast<std::size_t>(lowest)];
    std::int64_t min_ns = source.front().time_ns;
    for (const Item& item : source) min_ns = item.time_ns < min_ns ? item.time_ns : min_ns;
    last_ns_ = min_ns;
    nonempty_ &= ~(std::uint64_t{1} << lowest);
    for (const Item& item : source) push(item);  // every one lands below `lowest`
    source.clear();  // keeps its capacity
  }

  FifoQueue<Item> now_bucket_;                 // time == last_ns_
  std::array<std::vector<Item>, 64> buckets_;  // [b-1]: highest differing bit b-1
  std::uint64_t nonempty_ = 0;                 // bit b-1 set when buckets_[b-1] is not empty
  std::int64_t last_ns_ = 0;
};

}  // namespace prefetchlab::sim
