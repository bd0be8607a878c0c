#include "core/zero/trace_mode.hpp"

namespace prefetchlab::core {

const char* trace_mode_name(TraceMode mode) {
  switch (mode) {
    case TraceMode::kInvalid:
      return "invalid";
    case TraceMode::kRecord:
      return "record";
    case TraceMode::kComplete:
      return "complete";
  }
  return "invalid";
}

std::optional<TraceMode> parse_trace_mode(std::string_view name) {
  for (const TraceMode mode : {TraceMode::kInvalid, TraceMode::kRecord, TraceMode::kComplete}) {
    if (name == trace_mode_name(mode)) return mode;
  }
  return std::nullopt;
}

}  // namespace prefetchlab::core
