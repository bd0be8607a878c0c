#pragma once
// How unequal the ranks' work was: per iteration, the busiest rank's compute time over the
// ranks' mean, minus one. Collectives wait for the slowest rank, so a step follows the busiest
// rank's time; a simulator whose ranks are identical (no `noise:`) predicts the mean one.
// `validate` prints it for the real run and the simulation side by side.
#include <cstdint>
#include <span>

namespace prefetchlab::core {

struct RankIterationCompute {
  int rank = 0;
  int iteration = 0;  // numbered from 1
  std::int64_t compute_ns = 0;
};

// The median over iterations after `warmup_iterations` of (max over ranks / mean over ranks - 1);
// iterations where not every one of `ranks` ranks has a value, or the mean is 0, are skipped.
// 0 when no iteration qualifies.
double median_rank_imbalance(std::span<const RankIterationCompute> computes, int ranks, int warmup_iterations);

}  // namespace prefetchlab::core
