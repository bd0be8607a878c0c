#pragma once
// The two batch scripts of a Slurm sweep (slurm_sweep_plan.hpp): the array, one task per shard
// still to run, and the merge job that is submitted to run after it.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "apps/slurm/slurm_sweep_plan.hpp"

namespace prefetchlab::apps {

// `text` as one word for bash: single-quoted unless it is only safe characters.
std::string shell_quote(std::string_view text);

// A path the scripts carry must stay on its line: a control character (a newline above all)
// would end an #SBATCH line or a comment and start a command of its own (issue 46, S3). The
// output folder also appears in `#SBATCH --output=`, which sbatch splits at blanks and does not
// unquote, so there whitespace and quotes are refused too. Throws core::InputError naming `key`.
void check_script_path(const std::filesystem::path& path, const std::string& key, bool in_sbatch_line);

// Array tasks `tasks` (shard indices, sorted): each runs
//   prefetchlab sweep SCENARIO --grid GRID -o DIR/shards/<id> --shard <id>/N --resume -j <its CPUs>
// The shard count is written out rather than taken from SLURM_ARRAY_TASK_COUNT, which is the
// size of this array: a re-submission of some shards is a smaller array of the same sweep.
std::string sweep_array_script(const SlurmSweepPlan& plan, const std::filesystem::path& dir,
                               const std::vector<std::size_t>& tasks);

// `prefetchlab sweep-status DIR`, then `prefetchlab merge DIR DIR/shards/0 ... /N-1`: the
// merge fails (and says which points and shards) while any shard lacks rows.
std::string sweep_merge_script(const SlurmSweepPlan& plan, const std::filesystem::path& dir);

}  // namespace prefetchlab::apps
