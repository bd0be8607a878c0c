#pragma once
// Independent simulations on several threads (sweep, tune, compare and fidelity share it).
#include <atomic>
#include <cstddef>
#include <functional>

namespace prefetchlab::apps {

// The CPUs this process may run on: its affinity mask (sched_getaffinity), which is what a
// Slurm or cgroup cpuset allocation, `taskset` or `docker --cpuset-cpus` limit, not every core of
// the node. Falls back to std::thread::hardware_concurrency() where the mask cannot be read.
unsigned available_cpus();

// Threads to use: `requested` (0 = available_cpus()), never more than `work` items, at least 1.
unsigned thread_count(unsigned requested, std::size_t work);

// Runs body(i) for i in [0, count) on `threads` threads, stopping early when `stop` becomes true
// (body may set it). The exception of the lowest index that threw is rethrown after all joined,
// so the same bad input gives the same message whatever the thread count.
void parallel_for(std::size_t count, unsigned threads, std::atomic<bool>& stop,
                  const std::function<void(std::size_t)>& body);

}  // namespace prefetchlab::apps
