#pragma once
// The coordinator's trace mode, as DeepSpeed names it: INVALID (no trace, fetch on demand),
// RECORD (recording the module order this iteration, no prefetch), COMPLETE (prefetching from
// the recorded order). Its own header so the coordinator, the controller and the metrics share
// one definition.
#include <optional>
#include <string_view>

namespace prefetchlab::core {

// DeepSpeed's ZeRoTraceMode, with its numeric values.
enum class TraceMode { kRecord = 1, kComplete = 2, kInvalid = 3 };

// "invalid", "record", "complete".
const char* trace_mode_name(TraceMode mode);
std::optional<TraceMode> parse_trace_mode(std::string_view name);

}  // namespace prefetchlab::core
