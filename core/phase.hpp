#pragma once
// The pass a module hook belongs to. DeepSpeed's coordinator uses it only to name profiler events
// (and, in the adaptive-prefetch follow-up, to split stall statistics): the trace is one sequence
// covering forward and backward (research/deepspeed-zero3.md §1.10).
namespace prefetchlab::core {

enum class Phase { kForward, kBackward };

constexpr const char* phase_name(Phase phase) {
  return phase == Phase::kForward ? "forward" : "backward";
}

}  // namespace prefetchlab::core
