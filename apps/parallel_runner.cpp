#include "parallel_runner.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace prefetchlab::apps {

unsigned available_cpus() {
  // A dynamically sized set: the fixed cpu_set_t holds only 1024 CPUs.
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(static_cast<std::size_t>(cpus));
    if (!set) break;
    const std::size_t size = CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus));
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0 && count > 0) return static_cast<unsigned>(count);
    if (rc != 0 && errno != EINVAL) break;  // EINVAL: the kernel's mask is larger; try larger
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

unsigned thread_count(unsigned requested, std::size_t work) {
  const unsigned cores = requested ? requested : available_cpus();
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(cores, work)));
}

void parallel_for(std::size_t count, unsigned threads, std::atomic<bool>& stop,
                  const std::function<void(std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::size_t failed_index = count;
  std::exception_ptr failure;
  auto worker = [&] {
    for (;;) {
      if (stop.load()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        body(i);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (i < failed_index) {
          failed_index = i;
          failure = std::current_exception();
        }
        stop.store(true);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace prefetchlab::apps
