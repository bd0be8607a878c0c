#include "bandwidth_fit.hpp"

#include <cmath>

namespace prefetchlab::apps {

// With a_i = bytes_i / t_i (each point's own rate), predicted / measured = a_i x, x = 1 / bw;
// sum (a_i x - 1)^2 is least at x = sum a_i / sum a_i^2.
BandwidthFit fit_bandwidth(const std::vector<gpu::SizeTiming>& points, double bytes_per_time) {
  BandwidthFit fit;
  double sum = 0, sum_sq = 0;
  for (const auto& p : points) {
    if (p.time_ns <= 0 || p.bytes <= 0) continue;
    const double a = bytes_per_time * static_cast<double>(p.bytes) / (p.time_ns * 1e-9);
    sum += a, sum_sq += a * a;
  }
  if (sum_sq <= 0) {
    fit.predicted_ns.assign(points.size(), 0.0);
    return fit;
  }
  fit.bytes_per_s = sum_sq / sum;
  double err = 0;
  int n = 0;
  for (const auto& p : points) {
    const double predicted = bytes_per_time * static_cast<double>(p.bytes) / fit.bytes_per_s * 1e9;
    fit.predicted_ns.push_back(predicted);
    if (p.time_ns <= 0 || p.bytes <= 0) continue;
    err += std::pow(predicted / p.time_ns - 1, 2);
    ++n;
  }
  fit.rms_relative_error = std::sqrt(err / n);
  return fit;
}

}  // namespace prefetchlab::apps
