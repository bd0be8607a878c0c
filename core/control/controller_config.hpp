#pragma once
// The scenario's `controller:` section: which policy adapts the prefetch bucket and its
// constants. Only the configuration lives here; the policies themselves are separate files.
// An omitted section means `static`, as in DeepSpeed, where adaptation is opt-in.
#include <cstdint>
#include <string>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

enum class ControllerPolicy {
  kStatic,           // bucket never changes
  kDeepSpeedPr8431,  // deepspeedai/DeepSpeed PR #8431 as proposed, defects included
  kEmaThreshold,     // the follow-up (0z5a/DeepSpeed 6e70233); defects switchable for study
  kPaceSearch,       // ours: geometric search on the measured pace (pace_search_controller.cpp)
};
const char* controller_policy_name(ControllerPolicy policy);

// How ranks combine their view before a resize (review defect (a) is `kNone`).
enum class Agreement { kAllReduceMax, kBroadcastRank0, kNone };
const char* agreement_name(Agreement agreement);

// What a controller's timer sees (review defect (b) is `kHostTimers`).
enum class TimingSource { kDeviceEvents, kHostTimers };
const char* timing_source_name(TimingSource timing);

struct ControllerConfig {
  ControllerPolicy policy = ControllerPolicy::kStatic;
  // Defaults are PR #8431's constants (its description), which the follow-up 6e70233 keeps.
  double ema_alpha = 0.1;
  double grow_threshold = 0.15;
  double shrink_threshold = 0.05;
  double grow_factor = 1.25;
  double shrink_factor = 0.9;
  // deepspeed_pr8431 counts module fetches; ema_threshold counts iterations (forwards).
  std::int64_t update_interval = 10;
  std::int64_t min_bucket_numel = 10'000'000;   // stage3_adaptive_prefetch_min_size default
  std::int64_t max_bucket_numel = 500'000'000;  // stage3_adaptive_prefetch_max_size default
  // The four switches of ema_threshold; each value here is the fixed (follow-up) behaviour.
  Agreement agreement = Agreement::kAllReduceMax;
  TimingSource timing = TimingSource::kDeviceEvents;
  bool sample_during_record = false;
  bool clamp_initial = true;
  // pace_search only. search_factor: the first search step (x4 = two steps of a x2 grid);
  // memory_budget_bytes: peak reserved bytes a bucket may cost (0 = no budget). With a budget
  // the policy needs the samples column `peak_reserved_bytes` (prefetch_controller.hpp).
  double search_factor = 4.0;
  std::int64_t memory_budget_bytes = 0;
};

// pace_search's default lower bound: the bottom of issue 6's best-static grid (1e5), because
// the best bucket of a small model is often far below DeepSpeed's adaptive minimum of 1e7.
inline constexpr std::int64_t kPaceSearchDefaultMinBucketNumel = 100'000;

// Reads `controller:`. A key the chosen policy does not use is an error, so a constant that
// would silently have no effect cannot be written.
ControllerConfig load_controller_config(const YamlSection& section);

}  // namespace prefetchlab::core
