#pragma once
// DeepSpeed's two host throttles (partitioned_param_coordinator.py and stage3.py): the
// coordinator's __ongoing_fetch_events and stage3's param reduce events. Completed events are
// dropped from the front; when more than the limit remain, the host synchronises on the oldest.
// Executors keep the queue; this says which event (if any) the host must wait on now.
#include <cstddef>
#include <deque>
#include <optional>

namespace prefetchlab::core {

inline constexpr std::size_t kMaxOngoingFetchEvents = 2;  // __max_ongoing_fetch_events
inline constexpr std::size_t kMaxParamReduceEvents = 2;   // max_param_reduce_events

// Pops completed events off the front (is_done(event) must not block), then returns the oldest
// event when more than `limit` remain — the caller synchronises on it and pops it.
template <class Event, class IsDone>
std::optional<Event> event_to_synchronize(std::deque<Event>& events, std::size_t limit, IsDone is_done) {
  while (!events.empty() && is_done(events.front())) events.pop_front();
  if (events.size() > limit) return events.front();
  return std::nullopt;
}

}  // namespace prefetchlab::core
