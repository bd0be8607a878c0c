#pragma once
// A set kept as a sorted vector: std::set's order and the part of its interface the caching
// allocator's pools use (insert, erase by key or position, lower_bound, ordered iteration,
// count), in contiguous memory. A pool holds tens to a few hundred free blocks and is searched
// on every allocation; a red-black tree puts each key in a node of its own, so a search walks
// nodes scattered through the heap, where a vector's binary search touches a few cache lines
// (measured: bench/scale_bench.sh, docs/benchmarks.md).
#include <algorithm>
#include <cstddef>
#include <vector>

namespace prefetchlab::core {

template <class Key>  // Key has a strict weak order: operator<
class SortedVectorSet {
 public:
  using const_iterator = typename std::vector<Key>::const_iterator;

  const_iterator begin() const { return keys_.begin(); }
  const_iterator end() const { return keys_.end(); }
  std::size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }

  const_iterator lower_bound(const Key& key) const { return std::lower_bound(keys_.begin(), keys_.end(), key); }
  std::size_t count(const Key& key) const {
    const auto it = lower_bound(key);
    return it != keys_.end() && !(key < *it) ? 1 : 0;
  }
  // Inserts `key` unless an equal one is there; true when inserted.
  bool insert(const Key& key) {
    const auto it = lower_bound(key);
    if (it != keys_.end() && !(key < *it)) return false;
    keys_.insert(it, key);
    return true;
  }
  // Erases the key equal to `key`, if any; the number erased.
  std::size_t erase(const Key& key) {
    const auto it = lower_bound(key);
    if (it == keys_.end() || key < *it) return 0;
    keys_.erase(it);
    return 1;
  }
  // Erases the key at `position`; the position after it.
  const_iterator erase(const_iterator position) { return keys_.erase(position); }

 private:
  std::vector<Key> keys_;
};

}  // namespace prefetchlab::core
