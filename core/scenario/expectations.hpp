#pragma once
// A scenario's `expect:` section: what a run of it must produce. Bundled scenarios are
// regression tests (docs/architecture.md, "Conventions"); `run` checks and reports these, and
// summary.json records each check, so a test only has to read it.
//
//   expect:
//     status: ok                      # ok | collective_mismatch | oom | interrupted | error
//     steady_step_time_ms: [260, 275] # inclusive [min, max]; any listed metric
//     bucket_numel: {2: [6e7, 1e9]}   # the bucket at an iteration's first fetch (max over ranks)
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// Metrics an expectation can bound, in the units their key names say.
enum class ExpectedMetric {
  kSteadyStepTimeMs,
  kSamplesPerSecond,
  kTokensPerSecond,
  kTflopsPerGpu,
  kExposedCommMs,
  kForwardStallMs,
  kBackwardStallMs,
  kPeakGatheredParamMib,
  kPeakAllocatedMib,
  kPeakReservedMib,
  kIterations,
  kTraceInvalidationsPerIteration,
  kTraceInvalidationCostMs,
};

struct ExpectedRange {
  ExpectedMetric metric;
  std::string key;
  double min = 0;
  double max = 0;
};

struct ExpectedBucket {
  int iteration = 0;
  std::int64_t min_numel = 0;
  std::int64_t max_numel = 0;
};

struct Expectations {
  std::optional<RunStatus> status;
  std::vector<ExpectedRange> ranges;
  std::vector<ExpectedBucket> buckets;
  bool empty() const { return !status && ranges.empty() && buckets.empty(); }
};

Expectations load_expectations(const YamlSection& section);

// One line per check: {"check": key, "expected": ..., "actual": ..., "met": bool}.
nlohmann::ordered_json check_expectations(const Expectations& expectations, RunStatus status,
                                          const SummaryStats& stats);

}  // namespace prefetchlab::core
