#include "core/control/fetch_samples.hpp"

#include "core/control/prefetch_controller.hpp"

namespace prefetchlab::core {
namespace {

TimingSample sample_of(int iteration, int rank, const FetchTiming& fetch, const FetchTiming& previous) {
  TimingSample sample;
  sample.iteration = iteration;
  sample.rank = rank;
  sample.phase = fetch.phase;
  sample.wait_ns = fetch.device_end_ns - fetch.device_start_ns;
  sample.interval_ns = fetch.device_end_ns - previous.device_end_ns;
  // What host perf_counter timers would have read (review defect (b)).
  // In measured_sample_columns() order.
  sample.extra = {fetch.host_end_ns - fetch.host_start_ns, fetch.host_end_ns - previous.host_end_ns,
                  fetch.peak_reserved_bytes};
  return sample;
}

}  // namespace

std::vector<std::string> measured_sample_columns() {
  return {kHostWaitColumn, kHostIntervalColumn, kPeakReservedColumn};
}

std::vector<TimingSample> timing_samples(int iteration, int rank, std::span<const FetchTiming> fetches) {
  std::vector<TimingSample> samples;
  samples.reserve(fetches.size());
  const FetchTiming* previous[2] = {nullptr, nullptr};
  for (const FetchTiming& fetch : fetches) {
    const FetchTiming*& prev = previous[static_cast<int>(fetch.phase)];
    if (prev) samples.push_back(sample_of(iteration, rank, fetch, *prev));
    prev = &fetch;
  }
  return samples;
}

std::optional<TimingSample> host_sample_at_fetch_end(int iteration, int rank, std::span<const FetchTiming> fetches,
                                                     std::size_t index) {
  const FetchTiming& fetch = fetches[index];
  for (std::size_t f = index; f-- > 0;) {
    if (fetches[f].phase != fetch.phase) continue;
    TimingSample sample = sample_of(iteration, rank, fetch, fetches[f]);
    sample.wait_ns = 0;
    sample.interval_ns = 0;
    return sample;
  }
  return std::nullopt;
}

void deliver_samples(PrefetchController& controller, int iteration, int rank, std::span<const FetchTiming> fetches,
                     std::span<const std::size_t> invalidated_after) {
  const std::vector<TimingSample> samples = timing_samples(iteration, rank, fetches);
  std::size_t next_sample = 0;
  bool seen[2] = {false, false};
  std::size_t invalidation = 0;
  for (std::size_t f = 0; f < fetches.size(); ++f) {
    const int phase = static_cast<int>(fetches[f].phase);
    if (seen[phase]) controller.observe(samples[next_sample++]);
    seen[phase] = true;
    while (invalidation < invalidated_after.size() && invalidated_after[invalidation] == f) {
      controller.on_trace_invalidated();
      ++invalidation;
    }
  }
}

}  // namespace prefetchlab::core
