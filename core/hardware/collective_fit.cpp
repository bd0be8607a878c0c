#include "core/hardware/collective_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prefetchlab::core {
namespace {

struct Line {
  double intercept = 0;
  double slope = 0;  // us per byte of f * S
};

// Ordinary least squares of t on [1, x], solved with a column-pivoting QR (well conditioned
// even when x spans nine decades, after scaling x to [0, 1]).
Line least_squares(const std::vector<FitPoint>& pts, std::size_t first, std::size_t last,
                   double factor) {
  const auto n = static_cast<Eigen::Index>(last - first + 1);
  double x_max = 0;
  for (std::size_t i = first; i <= last; ++i) {
    x_max = std::max(x_max, factor * static_cast<double>(pts[i].bytes));
  }
  const double scale = x_max > 0 ? x_max : 1.0;
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd t(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto& p = pts[first + static_cast<std::size_t>(r)];
    a(r, 0) = 1.0;
    a(r, 1) = factor * static_cast<double>(p.bytes) / scale;
    t(r) = p.time_us;
  }
  const Eigen::Vector2d beta = a.colPivHouseholderQr().solve(t);
  return {beta(0), beta(1) / scale};
}

double predict(const Line& line, double factor, std::int64_t bytes) {
  return line.intercept + line.slope * factor * static_cast<double>(bytes);
}

double max_error(const std::vector<FitPoint>& pts, std::size_t first, std::size_t last,
                 const Line& line, double factor) {
  double worst = 0;
  for (std::size_t i = first; i <= last; ++i) {
    const double p = predict(line, factor, pts[i].bytes);
    worst = std::max(worst, std::abs(p - pts[i].time_us) / std::max(pts[i].time_us, 1e-9));
  }
  return worst;
}

}  // namespace

double CollectiveFit::latency_us() const {
  return ranges.empty() ? 0 : std::max(0.0, ranges.front().latency_us);
}

double CollectiveFit::bus_bandwidth_gb_per_s() const {
  return ranges.empty() ? 0 : ranges.back().bus_bandwidth_gb_per_s;
}

double CollectiveFit::end_to_end_bus_bandwidth_gb_per_s() const {
  if (points.size() < 2) return 0;
  const FitPoint& small = points.front();
  const FitPoint& large = points.back();
  const double dt_us = large.time_us - small.time_us;
  if (!(dt_us > 0)) return 0;
  return bus_factor * static_cast<double>(large.bytes - small.bytes) / (dt_us * 1e3);
}

CollectiveFit fit_collective(std::vector<FitPoint> points, double bus_factor, double tolerance) {
  if (!(bus_factor > 0)) throw std::invalid_argument("fit_collective: bus factor must be > 0");
  std::stable_sort(points.begin(), points.end(),
                   [](const FitPoint& a, const FitPoint& b) { return a.bytes < b.bytes; });
  if (points.size() < 2) throw std::invalid_argument("fit_collective needs at least two sizes");
  CollectiveFit fit;
  fit.points = points;
  fit.bus_factor = bus_factor;
  fit.predicted_us.assign(points.size(), 0);
  std::size_t first = 0;
  while (first < points.size()) {
    std::size_t last = std::min(first + 1, points.size() - 1);
    Line line = least_squares(points, first, last, bus_factor);
    while (last + 1 < points.size()) {
      const Line wider = least_squares(points, first, last + 1, bus_factor);
      if (max_error(points, first, last + 1, wider, bus_factor) > tolerance) break;
      line = wider;
      ++last;
    }
    // A single point left over joins this range rather than standing alone.
    if (last + 2 == points.size()) {
      ++last;
      line = least_squares(points, first, last, bus_factor);
    }
    FitRange range;
    range.first = first;
    range.last = last;
    range.latency_us = line.intercept;
    // slope is us per byte: busBW [GB/s] = 1 / (slope * 1e3) ... bytes/us = 1e-3 GB/s.
    range.bus_bandwidth_gb_per_s = line.slope > 0 ? 1.0 / line.slope * 1e-3 : 0.0;
    range.max_relative_error = max_error(points, first, last, line, bus_factor);
    for (std::size_t i = first; i <= last; ++i) {
      fit.predicted_us[i] = predict(line, bus_factor, points[i].bytes);
    }
    fit.ranges.push_back(range);
    first = last + 1;
  }
  return fit;
}

}  // namespace prefetchlab::core
