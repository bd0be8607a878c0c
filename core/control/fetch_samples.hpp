#pragma once
// How an executor turns one iteration's fetches into controller samples (samples.csv rows) and
// hands them to a controller — the rule every executor (the simulator, the real backend)
// shares, so a replay of either's samples.csv reproduces its buckets (contract of
// core/control/prefetch_controller.hpp, step 3).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"
#include "core/zero/phase.hpp"

namespace prefetchlab::core {

class PrefetchController;

// One fetch_sub_module call as measured: device times (compute-stream events at the top of the
// fetch and once compute waits for the all-gather stream, on any one clock per rank), host
// timer readings at the same points, and the rank's peak reserved bytes since reset_step.
struct FetchTiming {
  Phase phase = Phase::kForward;
  std::int64_t device_start_ns = 0;
  std::int64_t device_end_ns = 0;
  std::int64_t host_start_ns = 0;
  std::int64_t host_end_ns = 0;
  std::int64_t peak_reserved_bytes = 0;
};

// The extra sample columns both executors measure, in samples.csv order.
std::vector<std::string> measured_sample_columns();

// One sample per fetch that has an earlier fetch of the same phase in the iteration: wait =
// start -> end, interval = previous same-phase end -> this end (device and host alike).
std::vector<TimingSample> timing_samples(int iteration, int rank, std::span<const FetchTiming> fetches);

// The sample a per-fetch policy sees at the end of fetch `index` (host columns only; the device
// fields are 0 because events cannot be read without a synchronisation). nullopt for the first
// fetch of its phase.
std::optional<TimingSample> host_sample_at_fetch_end(int iteration, int rank, std::span<const FetchTiming> fetches,
                                                     std::size_t index);

// Delivers an iteration's samples in fetch order, with each trace invalidation right after the
// sample of the fetch that caused it (contract steps 3-4). `invalidated_after`: fetch indices,
// ascending.
void deliver_samples(PrefetchController& controller, int iteration, int rank, std::span<const FetchTiming> fetches,
                     std::span<const std::size_t> invalidated_after);

}  // namespace prefetchlab::core
