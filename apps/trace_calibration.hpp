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
};

int run_trace_calibration(const TraceCalibrationOptions& options);

}  // namespace prefetchlab::apps
