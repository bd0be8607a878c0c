#include "apps/slurm/sbatch_options.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "core/input/input_error.hpp"

namespace prefetchlab::apps {
namespace {

constexpr const char* kForm = "K=V with K an sbatch long option without dashes, e.g. partition=gpu, time=02:00:00";

// Set by the scripts themselves (sbatch_scripts.cpp) or by the submission.
constexpr std::array<std::string_view, 7> kReserved{"array", "output", "error", "dependency", "open-mode", "parsable",
                                                    "wrap"};
constexpr std::array<std::string_view, 5> kArrayOnly{"cpus-per-task", "mem-per-cpu", "gpus-per-task", "gres",
                                                     "ntasks-per-node"};

bool is_option_name(std::string_view key) {
  if (key.empty() || !(key[0] >= 'a' && key[0] <= 'z')) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

}  // namespace

std::vector<SbatchOption> parse_sbatch_options(const std::vector<std::string>& texts) {
  std::vector<SbatchOption> options;
  for (const auto& text : texts) {
    const core::InputLocation where{"--slurm-opt " + text, 0};
    const auto equals = text.find('=');
    if (equals == std::string::npos) throw core::InputError(where, "", "has no '='", kForm);
    SbatchOption option{text.substr(0, equals), text.substr(equals + 1)};
    if (option.key.rfind("--", 0) == 0) option.key.erase(0, 2);
    if (!is_option_name(option.key)) {
      throw core::InputError(where, option.key, "is not an sbatch option name (lower-case letters, digits, '-')", kForm);
    }
    if (option.value.empty()) throw core::InputError(where, option.key, "has an empty value", kForm);
    if (option.value.find_first_of("\n\r") != std::string::npos) {
      throw core::InputError(where, option.key, "has a line break in its value", "a value on one line");
    }
    if (std::find(kReserved.begin(), kReserved.end(), option.key) != kReserved.end()) {
      throw core::InputError(where, option.key, "is set by prefetchlab itself (the array of shards, the logs, the merge's dependency)",
                             "any other sbatch option");
    }
    const bool repeated = std::any_of(options.begin(), options.end(), [&](const SbatchOption& o) { return o.key == option.key; });
    if (repeated) throw core::InputError(where, option.key, "is given twice", "each sbatch option once");
    options.push_back(std::move(option));
  }
  return options;
}

std::vector<SbatchOption> merge_job_options(const std::vector<SbatchOption>& options) {
  std::vector<SbatchOption> kept;
  for (const auto& option : options) {
    if (std::find(kArrayOnly.begin(), kArrayOnly.end(), option.key) == kArrayOnly.end()) kept.push_back(option);
  }
  return kept;
}

}  // namespace prefetchlab::apps
