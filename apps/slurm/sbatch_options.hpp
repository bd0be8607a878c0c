#pragma once
// `--slurm-opt K=V`: an sbatch option (`#SBATCH --K=V`) for the scripts `sweep --slurm` writes:
// partition, account, time, qos, cpus-per-task, mem, constraint, ...
#include <string>
#include <vector>

namespace prefetchlab::apps {

struct SbatchOption {
  std::string key;    // sbatch's long option name without the dashes
  std::string value;
  bool operator==(const SbatchOption&) const = default;
};

// Parses each "K=V". Throws core::InputError at `--slurm-opt TEXT` for a key that is not an
// option name, an empty value, a line break, a key given twice, and the options the scripts set
// themselves (array, output, error, dependency, open-mode, parsable, wrap).
std::vector<SbatchOption> parse_sbatch_options(const std::vector<std::string>& texts);

// The options the merge job takes: all but what only sizes an array task (cpus-per-task, and
// the per-CPU and per-GPU requests), since merging is one short single-threaded pass.
std::vector<SbatchOption> merge_job_options(const std::vector<SbatchOption>& options);

}  // namespace prefetchlab::apps
