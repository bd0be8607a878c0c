#pragma once
// `prefetchlab validate SCENARIO --against-trace TRACE...`: the simulator against a real run's
// torch.profiler traces. The simulated run is written in the same Kineto schema and read back
// through the same reader, so both sides are measured the same way (docs/traces.md, "Validate").
#include <string>
#include <vector>

#include "core/trace_import/rank_timeline.hpp"

namespace prefetchlab::apps {

struct TraceValidationOptions {
  std::string scenario;
  std::vector<std::string> traces;
  std::string hardware;
  std::string output_dir;
  std::vector<std::string> overrides;
  core::TimelineOptions timeline;
};

int run_trace_validation(const TraceValidationOptions& options);

}  // namespace prefetchlab::apps
