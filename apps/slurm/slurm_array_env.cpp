#include "apps/slurm/slurm_array_env.hpp"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "core/input/input_error.hpp"

namespace prefetchlab::apps {
namespace {

const core::InputLocation kWhere{"--shard auto", 0};

std::optional<std::size_t> whole_number(const char* text) {
  if (text == nullptr) return std::nullopt;
  const std::string_view view(text);
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (view.empty() || error != std::errc{} || end != view.data() + view.size()) return std::nullopt;
  return value;
}

std::size_t required(const EnvLookup& env, const char* name) {
  const char* text = env(name);
  const auto value = whole_number(text);
  if (!value) {
    throw core::InputError(kWhere, name,
                           text == nullptr ? "is not set: this is not a Slurm array task"
                                           : "is '" + std::string(text) + "', not a whole number",
                           "--shard auto inside `sbatch --array` tasks only; elsewhere --shard i/N");
  }
  return *value;
}

}  // namespace

core::ShardSpec shard_from_slurm_array(const EnvLookup& env) {
  const std::size_t id = required(env, "SLURM_ARRAY_TASK_ID");
  const std::size_t count = required(env, "SLURM_ARRAY_TASK_COUNT");
  const std::size_t min = required(env, "SLURM_ARRAY_TASK_MIN");
  const std::size_t max = required(env, "SLURM_ARRAY_TASK_MAX");
  if (count == 0 || min != 0 || max + 1 != count || id > max) {
    throw core::InputError(kWhere, "SLURM_ARRAY_TASK_ID",
                           "is " + std::to_string(id) + " of an array of " + std::to_string(count) +
                               " tasks with indices " + std::to_string(min) + "-" + std::to_string(max) +
                               ": not the shards 0.." + std::to_string(count == 0 ? 0 : count - 1) +
                               " of one sweep, so the shard count is unknown",
                           "--shard $SLURM_ARRAY_TASK_ID/N with the sweep's shard count N");
  }
  return {id, count};
}

}  // namespace prefetchlab::apps
