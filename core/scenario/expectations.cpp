#include "core/scenario/expectations.hpp"

#include <array>
#include <string>

#include "core/input/size_value.hpp"
#include <utility>

namespace prefetchlab::core {
namespace {

constexpr std::array<std::pair<const char*, ExpectedMetric>, 13> kMetrics{{
    {"steady_step_time_ms", ExpectedMetric::kSteadyStepTimeMs},
    {"samples_per_second", ExpectedMetric::kSamplesPerSecond},
    {"tokens_per_second", ExpectedMetric::kTokensPerSecond},
    {"tflops_per_gpu", ExpectedMetric::kTflopsPerGpu},
    {"exposed_comm_ms", ExpectedMetric::kExposedCommMs},
    {"forward_stall_ms", ExpectedMetric::kForwardStallMs},
    {"backward_stall_ms", ExpectedMetric::kBackwardStallMs},
    {"peak_gathered_param_mib", ExpectedMetric::kPeakGatheredParamMib},
    {"peak_allocated_mib", ExpectedMetric::kPeakAllocatedMib},
    {"peak_reserved_mib", ExpectedMetric::kPeakReservedMib},
    {"iterations", ExpectedMetric::kIterations},
    {"trace_invalidations_per_iteration", ExpectedMetric::kTraceInvalidationsPerIteration},
    {"trace_invalidation_cost_ms", ExpectedMetric::kTraceInvalidationCostMs},
}};

double value_of(ExpectedMetric metric, const SummaryStats& s) {
  switch (metric) {
    case ExpectedMetric::kSteadyStepTimeMs: return static_cast<double>(s.steady_step_time_ns) / 1e6;
    case ExpectedMetric::kSamplesPerSecond: return s.samples_per_second;
    case ExpectedMetric::kTokensPerSecond: return s.tokens_per_second;
    case ExpectedMetric::kTflopsPerGpu: return s.tflops_per_gpu;
    case ExpectedMetric::kExposedCommMs: return static_cast<double>(s.mean_exposed_comm_ns) / 1e6;
    case ExpectedMetric::kForwardStallMs: return static_cast<double>(s.mean_forward_stall_ns) / 1e6;
    case ExpectedMetric::kBackwardStallMs: return static_cast<double>(s.mean_backward_stall_ns) / 1e6;
    case ExpectedMetric::kPeakGatheredParamMib:
      return static_cast<double>(s.peak_gathered_param_bytes) / (1024.0 * 1024.0);
    case ExpectedMetric::kPeakAllocatedMib: return static_cast<double>(s.peak_allocated_bytes) / (1024.0 * 1024.0);
    case ExpectedMetric::kPeakReservedMib: return static_cast<double>(s.peak_reserved_bytes) / (1024.0 * 1024.0);
    case ExpectedMetric::kIterations: return s.iterations;
    // 0 for runs without a moe section (no invalidation report).
    case ExpectedMetric::kTraceInvalidationsPerIteration:
      return s.trace_invalidations ? s.trace_invalidations->per_iteration : 0.0;
    case ExpectedMetric::kTraceInvalidationCostMs:
      return s.trace_invalidations ? static_cast<double>(s.trace_invalidations->mean_cost_ns) / 1e6 : 0.0;
  }
  return 0;
}

}  // namespace

Expectations load_expectations(const YamlSection& section) {
  Expectations out;
  if (section.has("status")) {
    out.status = section.require_enum<RunStatus>(
        "status", {{"ok", RunStatus::kOk},
                   {"collective_mismatch", RunStatus::kCollectiveMismatch},
                   {"oom", RunStatus::kOutOfMemory},
                   {"interrupted", RunStatus::kInterrupted},
                   {"error", RunStatus::kError}});
  }
  const std::string expected = "[min, max] with min <= max";
  for (const auto& [key, metric] : kMetrics) {
    if (!section.has(key)) continue;
    const YAML::Node node = section.raw(key);
    if (!node.IsSequence() || node.size() != 2 || !node[0].IsScalar() || !node[1].IsScalar()) {
      section.fail(key, "is not a two-number list", expected);
    }
    ExpectedRange range{metric, key, 0, 0};
    try {
      range.min = node[0].as<double>();
      range.max = node[1].as<double>();
    } catch (const YAML::Exception&) {
      section.fail(key, "holds something that is not a number", expected);
    }
    if (range.min > range.max) section.fail(key, "has min > max", expected);
    out.ranges.push_back(range);
  }
  const YamlSection buckets = section.section("bucket_numel");
  const std::string bucket_expected = "{iteration: [min, max]} with element counts, e.g. {2: [6e7, 1e9]}";
  for (const auto& key : buckets.keys()) {
    int iteration = 0;
    try {
      iteration = std::stoi(key);
    } catch (const std::exception&) {
    }
    if (iteration < 1 || std::to_string(iteration) != key) buckets.fail(key, "is not an iteration number", bucket_expected);
    const YAML::Node node = buckets.raw(key);
    ExpectedBucket bucket{iteration, -1, -1};
    if (node.IsSequence() && node.size() == 2 && node[0].IsScalar() && node[1].IsScalar()) {
      bucket.min_numel = parse_count(node[0].Scalar()).value_or(-1);
      bucket.max_numel = parse_count(node[1].Scalar()).value_or(-1);
    }
    if (bucket.min_numel < 0 || bucket.max_numel < bucket.min_numel) {
      buckets.fail(key, "is not a [min, max] pair of element counts", bucket_expected);
    }
    out.buckets.push_back(bucket);
  }
  buckets.finish();
  // Every key expect: takes is known, present or not, so a misspelt one is told the whole
  // vocabulary (and the closest key), not only the keys the file happens to hold.
  section.mark_known("status");
  for (const auto& entry : kMetrics) section.mark_known(entry.first);
  section.finish();
  return out;
}

nlohmann::ordered_json check_expectations(const Expectations& expectations, RunStatus status,
                                          const SummaryStats& stats) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  if (expectations.status) {
    checks.push_back({{"check", "status"},
                      {"expected", run_status_name(*expectations.status)},
                      {"actual", run_status_name(status)},
                      {"met", *expectations.status == status}});
  }
  for (const auto& range : expectations.ranges) {
    const double actual = value_of(range.metric, stats);
    checks.push_back({{"check", range.key},
                      {"expected", {range.min, range.max}},
                      {"actual", actual},
                      {"met", actual >= range.min && actual <= range.max}});
  }
  for (const auto& bucket : expectations.buckets) {
    const auto& trajectory = stats.bucket_trajectory_numel;
    const bool present = bucket.iteration <= static_cast<int>(trajectory.size());
    const std::int64_t actual = present ? trajectory[static_cast<std::size_t>(bucket.iteration - 1)] : -1;
    checks.push_back({{"check", "bucket_numel at iteration " + std::to_string(bucket.iteration)},
                      {"expected", {bucket.min_numel, bucket.max_numel}},
                      {"actual", actual},
                      {"met", present && actual >= bucket.min_numel && actual <= bucket.max_numel}});
  }
  return checks;
}

}  // namespace prefetchlab::core
