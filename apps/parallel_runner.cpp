#include "parallel_runner.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace prefetchlab::apps {

unsigned thread_count(unsigned requested, std::size_t work) {
  const unsigned cores = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
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
