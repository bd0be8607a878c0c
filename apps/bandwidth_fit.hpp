#pragma once
// A bandwidth fitted to times measured over sizes, in the simulator's form for memory-bound
// kernels and host<->device copies: t = bytes / bandwidth (no latency term: sim::ComputeModel
// and the host-copy kernels charge none). Least squares of the relative errors, so each size
// counts alike however large.
#include <cstdint>
#include <vector>

#include "gpu_backend/microbenchmarks.hpp"

namespace prefetchlab::apps {

struct BandwidthFit {
  double bytes_per_s = 0;
  std::vector<double> predicted_ns;  // per point
  double rms_relative_error = 0;     // of predicted against measured
};

// `bytes_per_time` scales each point's bytes (2 for a pass that reads and writes them).
// Points with no time are ignored; none left gives bytes_per_s 0.
BandwidthFit fit_bandwidth(const std::vector<gpu::SizeTiming>& points, double bytes_per_time = 1.0);

}  // namespace prefetchlab::apps
