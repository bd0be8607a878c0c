#pragma once
// Independent simulations on several threads (sweep and tune share it).
#include <atomic>
#include <cstddef>
#include <functional>

namespace prefetchlab::apps {

// Threads to use: `requested` (0 = all cores), never more than `work` items, at least 1.
unsigned thread_count(unsigned requested, std::size_t work);

// Runs body(i) for i in [0, count) on `threads` threads, stopping early when `stop` becomes true
// (body may set it). The exception of the lowest index that threw is rethrown after all joined,
// so the same bad input gives the same message whatever the thread count.
void parallel_for(std::size_t count, unsigned threads, std::atomic<bool>& stop,
                  const std::function<void(std::size_t)>& body);

}  // namespace prefetchlab::apps
