#pragma once
// `prefetchlab calibrate --from-trace TRACE... [--base PROFILE] -o PROFILE.yaml`: a hardware
// profile fitted to a real run's torch.profiler traces (docs/traces.md, "Calibrate").
#include <string>
#include <vector>

#include "core/trace_import/rank_timeline.hpp"

namespace prefetchlab::apps {

struct TraceCalibrationOptions {
  std::vector<std::string> traces;
  std::string base;  // bundled name or YAML path
  std::string output;
  core::TimelineOptions timeline;
  double tolerance = 0.05;
  // Optional: a scenario of the traced job, simulated to fit compute_time_scale (the real
  // compute busy time per step over the simulated one).
  std::string scenario;
  std::vector<std::string> overrides;
};

int run_trace_calibration(const TraceCalibrationOptions& options);

}  // namespace prefetchlab::apps
