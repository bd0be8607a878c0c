#pragma once
// What `prefetchlab tune` searches for one policy: the dimensions, how a candidate becomes
// scenario overrides, and how the winner is written out (controller.yaml, ds_config.json).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/search/tune_search.hpp"

namespace prefetchlab::apps {

enum class TunePolicy { kStatic, kEmaThreshold, kPaceSearch };

// One tuned setting as the report lists it.
struct TunedSetting {
  std::string key;       // controller key or DeepSpeed key
  std::string value;     // as written to the outputs
  std::string deepspeed; // how DeepSpeed takes it: its key, "needs PR #8431", or "hard-coded ..."
};

class TuneSpace {
 public:
  TuneSpace(TunePolicy policy, bool deployable);

  TunePolicy policy() const { return policy_; }
  bool deployable() const { return deployable_; }
  const char* policy_name() const;

  // Starts at the policy's defaults (DeepSpeed's code defaults; PR #8431's constants).
  const std::vector<core::SearchDimension>& dimensions() const { return dimensions_; }

  // `--set` overrides that run a candidate (decoded values, one per dimension).
  std::vector<std::string> overrides(const std::vector<double>& values) const;
  // The policy with every default, as the baseline "default" row.
  std::vector<std::string> default_overrides() const;

  std::vector<TunedSetting> settings(const std::vector<double>& values) const;
  // DIR/controller.yaml: a `controller:` section a scenario can hold as is.
  std::string controller_yaml(const std::vector<double>& values, const std::string& header_comment) const;
  // DIR/ds_config.json: {"zero_optimization": {...}} with DeepSpeed's own key names only.
  nlohmann::json ds_config(const std::vector<double>& values) const;
  // For results DeepSpeed cannot take from its config: each constant it hard-codes, and the
  // tuned value. Empty when the result is deployable as is.
  std::vector<std::string> hard_coded_notes(const std::vector<double>& values) const;

 private:
  // key -> text: numbers as they go into a scenario, so what was simulated is what is written.
  std::vector<std::pair<std::string, std::string>> controller_keys(const std::vector<double>& values) const;

  TunePolicy policy_;
  bool deployable_;
  std::vector<core::SearchDimension> dimensions_;
};

// "1.25" (4 significant digits) or "12345678" for a whole-number dimension.
std::string format_tuned_value(double value, bool integer);

}  // namespace prefetchlab::apps
