#pragma once
// `prefetchlab trace-summary`: per profiled step, over all ranks, what the real job did — step
// time, compute busy, each collective kind's count / elements / true time / skew, exposed
// communication, host time per collective call, peak allocated memory.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace_import/trace_set.hpp"

namespace prefetchlab::core {

// min / median / max over the ranks that have the step.
struct RankSpread {
  std::int64_t min = 0;
  std::int64_t median = 0;
  std::int64_t max = 0;
};

struct CollectiveKindSummary {
  CollectiveKind kind = CollectiveKind::kOther;
  std::int64_t count_min = 0;  // per rank
  std::int64_t count_max = 0;
  std::int64_t elements = -1;  // per rank, the largest rank's sum of full-buffer elements; -1 unknown
  RankSpread span_ns;          // per rank: sum of its kernel (or gloo work) spans, wait included
  std::int64_t matched = 0;    // instances matched across ranks
  std::int64_t true_ns = -1;   // sum over matched of min(end) - max(start); -1 without cross-rank clocks
  std::int64_t skew_ns = -1;   // sum over matched of max(start) - min(start)
  std::int64_t host_calls = 0; // host-side calls, the most on one rank
  std::int64_t host_call_median_ns = -1;  // over every rank's calls
};

struct HookSummary {
  std::string function;
  std::int64_t calls = 0;             // the most on one rank
  std::int64_t median_ns = 0;         // over every rank's calls, nested calls included
};

struct StepSummary {
  std::int64_t number = 0;
  std::int64_t ranks = 0;
  RankSpread step_ns;
  RankSpread compute_busy_ns;
  RankSpread exposed_comm_ns;
  std::vector<CollectiveKindSummary> collectives;  // by kind
  std::int64_t peak_allocated_bytes = -1;  // the largest over ranks; -1 without device memory events
  std::int64_t peak_cpu_allocated_bytes = -1;
  std::vector<HookSummary> hooks;  // DeepSpeed's, by name (with_stack traces)
};

struct TraceSummary {
  std::vector<StepSummary> steps;  // by step number
};

TraceSummary summarize_traces(const TraceSet& set);

// The report printed by `trace-summary`: files and ranks, what they cannot provide, one block
// per step. Same input, same text.
std::string format_trace_summary(const TraceSet& set, const TraceSummary& summary);
nlohmann::ordered_json trace_summary_json(const TraceSet& set, const TraceSummary& summary);

}  // namespace prefetchlab::core
