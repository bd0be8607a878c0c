#pragma once
// Fits nccl-tests measurements to the collective cost model's form
//   t = latency + f * S / busBW      (f = (n-1)/n for all_gather / reduce_scatter, 2(n-1)/n
//                                     for all_reduce; S = nccl-tests' size column)
// by least squares (Eigen), per size range: NCCL switches protocol, algorithm and channel count
// with size, so one line does not fit a whole sweep. Ranges are found greedily from the
// smallest size: a range grows while its own least-squares line predicts every time in it within
// `tolerance` (relative); then a new range starts.
#include <cstdint>
#include <vector>

namespace prefetchlab::core {

struct FitPoint {
  std::int64_t bytes = 0;
  double time_us = 0;
};

struct FitRange {
  std::size_t first = 0;  // indices into the points, inclusive
  std::size_t last = 0;
  double latency_us = 0;            // intercept
  double bus_bandwidth_gb_per_s = 0;  // 1 / slope; 0 when the slope is not positive (flat range)
  double max_relative_error = 0;
};

struct CollectiveFit {
  std::vector<FitPoint> points;       // sorted by size
  std::vector<FitRange> ranges;       // cover every point, in size order
  std::vector<double> predicted_us;   // per point, from its range's line
  // What a profile takes: the smallest sizes' latency (clamped >= 0) and the largest sizes'
  // bus bandwidth.
  double latency_us() const;
  double bus_bandwidth_gb_per_s() const;
  // The fallback where the largest sizes' line is flat or falling (noise on a loaded host with
  // few repetitions): bus_factor x (largest - smallest size) / (their time difference); 0 when
  // the largest size was not the slower.
  double end_to_end_bus_bandwidth_gb_per_s() const;
  double bus_factor = 0;
};

// Throws std::invalid_argument with fewer than two points or a non-positive factor.
CollectiveFit fit_collective(std::vector<FitPoint> points, double bus_factor, double tolerance);

}  // namespace prefetchlab::core
