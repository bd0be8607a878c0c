#pragma once
// `sweep --shard auto`: inside a Slurm array task the shard is the task's index in the array.
// Slurm sets SLURM_ARRAY_TASK_ID, _COUNT, _MIN and _MAX for every task of an array job (sbatch(1),
// "OUTPUT ENVIRONMENT VARIABLES").
#include <functional>

#include "apps/search/shard_spec.hpp"

namespace prefetchlab::apps {

// Looks a variable up (nullptr when unset): std::getenv in the command, a map in tests.
using EnvLookup = std::function<const char*(const char*)>;

// Shard i/N = SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT. Throws core::InputError at
// `--shard auto` outside an array task, and for an array whose indices are not 0..COUNT-1 (a
// re-submitted subset, say), where the count is not the sweep's: `--shard ID/N` says it then.
core::ShardSpec shard_from_slurm_array(const EnvLookup& env);

}  // namespace prefetchlab::apps
