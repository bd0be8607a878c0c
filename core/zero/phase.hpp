#pragma once
// The pass a module hook belongs to. DeepSpeed's coordinator uses it only to name profiler events
// (and, in the adaptive-prefetch follow-up, to split stall statistics): the trace is one sequence
// covering forward and backward (DeepSpeed's
// partitioned_param_coordinator.py).
#include <optional>
#include <string_view>

namespace prefetchlab::core {

enum class Phase { kForward, kBackward };

// "forward", "backward" (also the spelling of samples.csv's phase column).
constexpr const char* phase_name(Phase phase) {
  return phase == Phase::kForward ? "forward" : "backward";
}

constexpr std::optional<Phase> parse_phase(std::string_view name) {
  if (name == "forward") return Phase::kForward;
  if (name == "backward") return Phase::kBackward;
  return std::nullopt;
}

}  // namespace prefetchlab::core
