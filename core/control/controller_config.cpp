#include "core/control/controller_config.hpp"

#include <array>
#include <limits>
#include <string_view>

namespace prefetchlab::core {

const char* controller_policy_name(ControllerPolicy policy) {
  switch (policy) {
    case ControllerPolicy::kStatic: return "static";
    case ControllerPolicy::kDeepSpeedPr8431: return "deepspeed_pr8431";
    case ControllerPolicy::kEmaThreshold: return "ema_threshold";
    case ControllerPolicy::kPaceSearch: return "pace_search";
  }
  return "?";
}

const char* agreement_name(Agreement agreement) {
  switch (agreement) {
    case Agreement::kAllReduceMax: return "allreduce_max";
    case Agreement::kBroadcastRank0: return "broadcast_rank0";
    case Agreement::kNone: return "none";
  }
  return "?";
}

const char* timing_source_name(TimingSource timing) {
  switch (timing) {
    case TimingSource::kDeviceEvents: return "device_events";
    case TimingSource::kHostTimers: return "host_timers";
  }
  return "?";
}

ControllerConfig load_controller_config(const YamlSection& section) {
  ControllerConfig config;
  config.policy = section.get_enum<ControllerPolicy>(
      "policy", ControllerPolicy::kStatic,
      {{"static", ControllerPolicy::kStatic},
       {"deepspeed_pr8431", ControllerPolicy::kDeepSpeedPr8431},
       {"ema_threshold", ControllerPolicy::kEmaThreshold},
       {"pace_search", ControllerPolicy::kPaceSearch}});
  const bool pace = config.policy == ControllerPolicy::kPaceSearch;
  const bool adaptive = config.policy != ControllerPolicy::kStatic && !pace;
  const bool switchable = config.policy == ControllerPolicy::kEmaThreshold;
  constexpr double kInf = std::numeric_limits<double>::infinity();

  // A key that exists for another policy gets a precise message instead of "unknown key".
  static constexpr std::array<std::string_view, 4> kSwitchKeys{
      "agreement", "timing", "sample_during_record", "clamp_initial"};
  auto reject_unless = [&](const auto& keys, bool used) {
    if (used) return;
    for (const auto key : keys) {
      if (section.has(key)) {
        section.fail(key,
                     std::string("is not used by policy '") +
                         controller_policy_name(config.policy) + "'",
                     "only the keys of the chosen policy (docs/controllers.md)");
      }
    }
  };
  static constexpr std::array<std::string_view, 6> kThresholdKeys{
      "ema_alpha",     "grow_threshold",  "shrink_threshold",
      "grow_factor",   "shrink_factor",   "update_interval"};
  static constexpr std::array<std::string_view, 2> kBoundKeys{"min_bucket_numel", "max_bucket_numel"};
  static constexpr std::array<std::string_view, 2> kPaceKeys{"search_factor", "memory_budget_bytes"};
  reject_unless(kThresholdKeys, adaptive);
  reject_unless(kBoundKeys, adaptive || pace);
  reject_unless(kSwitchKeys, switchable);
  reject_unless(kPaceKeys, pace);

  if (adaptive) {
    config.ema_alpha = section.get_double("ema_alpha", config.ema_alpha, 1e-9, 1.0);
    config.grow_threshold = section.get_double("grow_threshold", config.grow_threshold, 0.0, kInf);
    config.shrink_threshold =
        section.get_double("shrink_threshold", config.shrink_threshold, 0.0, kInf);
    config.grow_factor = section.get_double("grow_factor", config.grow_factor, 1.0, kInf);
    config.shrink_factor = section.get_double("shrink_factor", config.shrink_factor, 0.0, 1.0);
    config.update_interval = section.get_int("update_interval", config.update_interval, 1,
                                             std::numeric_limits<std::int32_t>::max());
    config.min_bucket_numel = section.get_count("min_bucket_numel", config.min_bucket_numel);
    config.max_bucket_numel = section.get_count("max_bucket_numel", config.max_bucket_numel);
    if (config.shrink_threshold > config.grow_threshold) {
      section.fail("shrink_threshold", "is above grow_threshold",
                   "shrink_threshold <= grow_threshold (a dead band between them)");
    }
    if (config.min_bucket_numel > config.max_bucket_numel) {
      section.fail("min_bucket_numel", "is above max_bucket_numel", "min <= max");
    }
  }
  if (pace) {
    config.min_bucket_numel = section.get_count("min_bucket_numel", kPaceSearchDefaultMinBucketNumel, 1);
    config.max_bucket_numel = section.get_count("max_bucket_numel", config.max_bucket_numel, 1);
    if (config.min_bucket_numel > config.max_bucket_numel) {
      section.fail("min_bucket_numel", "is above max_bucket_numel", "min <= max");
    }
    config.search_factor = section.get_double("search_factor", config.search_factor, 1.5, 1024.0);
    config.memory_budget_bytes = section.get_bytes("memory_budget_bytes", config.memory_budget_bytes);
    // Every rank runs the same search on agreed measurements of the device's stall.
    config.agreement = Agreement::kAllReduceMax;
    config.timing = TimingSource::kDeviceEvents;
  }
  if (switchable) {
    config.agreement = section.get_enum<Agreement>(
        "agreement", config.agreement,
        {{"allreduce_max", Agreement::kAllReduceMax},
         {"broadcast_rank0", Agreement::kBroadcastRank0},
         {"none", Agreement::kNone}});
    config.timing = section.get_enum<TimingSource>(
        "timing", config.timing,
        {{"device_events", TimingSource::kDeviceEvents}, {"host_timers", TimingSource::kHostTimers}});
    config.sample_during_record =
        section.get_bool("sample_during_record", config.sample_during_record);
    config.clamp_initial = section.get_bool("clamp_initial", config.clamp_initial);
  } else if (config.policy == ControllerPolicy::kDeepSpeedPr8431) {
    // The original PR as reviewed: each rank alone, host timers, samples while recording, and
    // no clamp of the starting bucket (deepspeedai/DeepSpeed PR #8431).
    config.agreement = Agreement::kNone;
    config.timing = TimingSource::kHostTimers;
    config.sample_during_record = true;
    config.clamp_initial = false;
  }
  section.finish();
  return config;
}

}  // namespace prefetchlab::core
