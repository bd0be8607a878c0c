#pragma once
// A table keyed by ids that only grow (a rank's gather handles, its all-gathers): entries come
// at the back as ids are first used and go from the front once finished, so a long run keeps
// the ids in flight, not every id it ever used (an iteration of Llama-2-70B uses ~1,000 of each).
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

namespace prefetchlab::sim {

template <class T>
class IdWindow {
 public:
  explicit IdWindow(T unused = T{}) : unused_(std::move(unused)) {}

  // Whether `id` was dropped: it finished, and everything before it too.
  bool dropped(std::int64_t id) const { return id < base_; }
  // The entry of `id`, made `unused` the first time; std::logic_error for a dropped id.
  T& operator[](std::int64_t id) {
    if (id < base_) throw std::logic_error("id " + std::to_string(id) + " was already dropped from its window");
    while (id >= base_ + static_cast<std::int64_t>(items_.size())) items_.push_back(unused_);
    return items_[static_cast<std::size_t>(id - base_)];
  }
  // Drops entries from the front while `finished(entry)` holds.
  template <class Finished>
  void drop_finished(Finished finished) {
    while (!items_.empty() && finished(items_.front())) {
      items_.pop_front();
      ++base_;
    }
  }
  std::size_t size() const { return items_.size(); }

 private:
  T unused_;
  std::deque<T> items_;
  std::int64_t base_ = 0;  // the id of items_.front()
};

}  // namespace prefetchlab::sim
