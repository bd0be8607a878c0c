#include "tune_space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "core/control/controller_config.hpp"
#include "core/zero/zero_config.hpp"

namespace prefetchlab::apps {
namespace {

// DeepSpeed's code defaults (deepspeed/runtime/zero/config.py) and PR #8431's constants (kept by
// the follow-up 6e70233, which hard-codes all but min/max): the config types hold them.
const core::ZeroConfig kZeroDefaults{};
const core::ControllerConfig kControllerDefaults{};

struct HardCoded {
  std::string_view key;
  double deepspeed_value;
};
const HardCoded kEmaHardCoded[] = {{"ema_alpha", kControllerDefaults.ema_alpha},
                                   {"grow_threshold", kControllerDefaults.grow_threshold},
                                   {"shrink_threshold", kControllerDefaults.shrink_threshold},
                                   {"grow_factor", kControllerDefaults.grow_factor},
                                   {"shrink_factor", kControllerDefaults.shrink_factor},
                                   {"update_interval", static_cast<double>(kControllerDefaults.update_interval)}};

double as_double(std::int64_t numel) { return static_cast<double>(numel); }

core::SearchDimension dim(std::string name, double lower, double upper, double start, bool log_scale,
                          bool integer) {
  return {std::move(name), lower, upper, start, log_scale, integer};
}

std::size_t index_of(const std::vector<core::SearchDimension>& dims, std::string_view name) {
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].name == name) return i;
  }
  return dims.size();
}

}  // namespace

std::string format_tuned_value(double value, bool integer) {
  char buffer[48];
  if (integer) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.4g", value);
  }
  return buffer;
}

TuneSpace::TuneSpace(TunePolicy policy, bool deployable) : policy_(policy), deployable_(deployable) {
  switch (policy) {
    case TunePolicy::kStatic:
      // Sizes span from "one parameter per collective" to DeepSpeed's defaults and beyond.
      dimensions_ = {
          dim("stage3_prefetch_bucket_size", 1e5, 1e9, as_double(kZeroDefaults.prefetch_bucket_numel), true, true),
          dim("stage3_max_live_parameters", 1e7, 1e10, as_double(kZeroDefaults.max_live_numel), true, true),
          dim("stage3_max_reuse_distance", 1e5, 1e10, as_double(kZeroDefaults.max_reuse_distance_numel), true, true),
          dim("stage3_param_persistence_threshold", 1e3, 1e7,
              as_double(kZeroDefaults.param_persistence_threshold_numel), true, true)};
      break;
    case TunePolicy::kEmaThreshold:
      if (!deployable) {
        const core::ControllerConfig& d = kControllerDefaults;
        dimensions_ = {dim("ema_alpha", 0.02, 1.0, d.ema_alpha, true, false),
                       dim("grow_threshold", 0.01, 1.0, d.grow_threshold, true, false),
                       // shrink_threshold as a fraction of grow_threshold keeps shrink <= grow.
                       dim("shrink_fraction", 0.0, 1.0, d.shrink_threshold / d.grow_threshold, false, false),
                       dim("grow_factor", 1.05, 4.0, d.grow_factor, true, false),
                       dim("shrink_factor", 0.25, 0.99, d.shrink_factor, false, false),
                       dim("update_interval", 1, 20, as_double(d.update_interval), true, true)};
      }
      dimensions_.push_back(dim("min_bucket_numel", 1e5, 1e9, as_double(kControllerDefaults.min_bucket_numel), true, true));
      dimensions_.push_back(dim("max_bucket_numel", 1e6, 1e9, as_double(kControllerDefaults.max_bucket_numel), true, true));
      break;
    case TunePolicy::kPaceSearch:
      dimensions_ = {dim("min_bucket_numel", 1e4, 1e8, 1e5, true, true),
                     dim("max_bucket_numel", 1e6, 1e9, as_double(kControllerDefaults.max_bucket_numel), true, true),
                     dim("search_factor", 1.5, 16.0, 4.0, true, false)};
      break;
  }
}

const char* TuneSpace::policy_name() const {
  switch (policy_) {
    case TunePolicy::kStatic: return "static";
    case TunePolicy::kEmaThreshold: return "ema_threshold";
    case TunePolicy::kPaceSearch: return "pace_search";
  }
  return "?";
}

std::vector<std::pair<std::string, std::string>> TuneSpace::controller_keys(const std::vector<double>& values) const {
  std::vector<std::pair<std::string, std::string>> keys;
  auto value_of = [&](std::string_view name) { return values.at(index_of(dimensions_, name)); };
  auto text_of = [&](std::string_view name) {
    const std::size_t i = index_of(dimensions_, name);
    return format_tuned_value(values.at(i), dimensions_[i].integer);
  };
  if (policy_ == TunePolicy::kStatic) return keys;
  if (policy_ == TunePolicy::kEmaThreshold && !deployable_) {
    const double grow = std::stod(text_of("grow_threshold"));
    keys.emplace_back("ema_alpha", text_of("ema_alpha"));
    keys.emplace_back("grow_threshold", text_of("grow_threshold"));
    keys.emplace_back("shrink_threshold", format_tuned_value(std::min(grow, grow * value_of("shrink_fraction")), false));
    keys.emplace_back("grow_factor", text_of("grow_factor"));
    keys.emplace_back("shrink_factor", text_of("shrink_factor"));
    keys.emplace_back("update_interval", text_of("update_interval"));
  }
  // A minimum above the maximum means "pinned at the maximum" (the loader requires min <= max).
  const double max_numel = value_of("max_bucket_numel");
  keys.emplace_back("min_bucket_numel", format_tuned_value(std::min(value_of("min_bucket_numel"), max_numel), true));
  keys.emplace_back("max_bucket_numel", text_of("max_bucket_numel"));
  if (policy_ == TunePolicy::kPaceSearch) keys.emplace_back("search_factor", text_of("search_factor"));
  return keys;
}

std::vector<std::string> TuneSpace::overrides(const std::vector<double>& values) const {
  if (policy_ == TunePolicy::kStatic) {
    std::vector<std::string> out{"controller={policy: static}"};
    for (std::size_t i = 0; i < dimensions_.size(); ++i) {
      out.push_back("zero." + dimensions_[i].name + "=" + format_tuned_value(values.at(i), true));
    }
    return out;
  }
  std::string section = std::string("controller={policy: ") + policy_name();
  for (const auto& [key, text] : controller_keys(values)) section += ", " + key + ": " + text;
  return {section + "}"};
}

std::vector<std::string> TuneSpace::default_overrides() const {
  std::vector<double> start;
  for (const auto& d : dimensions_) start.push_back(d.start);
  return overrides(start);
}

std::vector<TunedSetting> TuneSpace::settings(const std::vector<double>& values) const {
  std::vector<TunedSetting> out;
  if (policy_ == TunePolicy::kStatic) {
    for (std::size_t i = 0; i < dimensions_.size(); ++i) {
      out.push_back({dimensions_[i].name, format_tuned_value(values.at(i), true), dimensions_[i].name});
    }
    return out;
  }
  for (const auto& [key, text] : controller_keys(values)) {
    std::string deepspeed;
    if (policy_ == TunePolicy::kPaceSearch) {
      deepspeed = "not in DeepSpeed (PrefetchLab's pace_search)";
    } else if (key == "min_bucket_numel") {
      deepspeed = "stage3_adaptive_prefetch_min_size (needs PR #8431)";
    } else if (key == "max_bucket_numel") {
      deepspeed = "stage3_adaptive_prefetch_max_size (needs PR #8431)";
    } else {
      deepspeed = "hard-coded in DeepSpeed (PR #8431 / 6e70233)";
    }
    out.push_back({key, text, deepspeed});
  }
  return out;
}

std::string TuneSpace::controller_yaml(const std::vector<double>& values, const std::string& header_comment) const {
  std::string text = header_comment;
  text += "controller:\n";
  text += std::string("  policy: ") + policy_name() + "\n";
  for (const auto& [key, value] : controller_keys(values)) text += "  " + key + ": " + value + "\n";
  return text;
}

nlohmann::json TuneSpace::ds_config(const std::vector<double>& values) const {
  nlohmann::json zero = nlohmann::json::object();
  zero["stage"] = 3;
  if (policy_ == TunePolicy::kStatic) {
    for (std::size_t i = 0; i < dimensions_.size(); ++i) {
      zero[dimensions_[i].name] = static_cast<std::int64_t>(values.at(i));
    }
  } else if (policy_ == TunePolicy::kEmaThreshold) {
    // DeepSpeed's switch selects the follow-up controller with its hard-coded constants.
    zero["stage3_adaptive_prefetch_bucket_size"] = true;
    for (const auto& [key, text] : controller_keys(values)) {
      if (key == "min_bucket_numel") zero["stage3_adaptive_prefetch_min_size"] = std::stoll(text);
      if (key == "max_bucket_numel") zero["stage3_adaptive_prefetch_max_size"] = std::stoll(text);
    }
  }
  return nlohmann::json{{"zero_optimization", zero}};
}

std::vector<std::string> TuneSpace::hard_coded_notes(const std::vector<double>& values) const {
  std::vector<std::string> notes;
  if (policy_ == TunePolicy::kPaceSearch) {
    notes.push_back("pace_search is PrefetchLab's own controller: DeepSpeed has no such policy, so no "
                    "ds_config key selects it (ds_config.json holds only `stage`).");
    return notes;
  }
  if (policy_ != TunePolicy::kEmaThreshold || deployable_) return notes;
  const auto keys = controller_keys(values);
  for (const auto& constant : kEmaHardCoded) {
    for (const auto& [key, text] : keys) {
      if (key != constant.key) continue;
      notes.push_back("`" + key + "`: DeepSpeed hard-codes " + format_tuned_value(constant.deepspeed_value, false) +
                      "; tuned " + text);
    }
  }
  return notes;
}

}  // namespace prefetchlab::apps
