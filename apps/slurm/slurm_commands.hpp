#pragma once
// Slurm's own commands, run as child processes: sbatch to submit, squeue to ask about jobs.
#include <filesystem>
#include <string>
#include <vector>

namespace prefetchlab::apps {

struct CommandResult {
  int exit_code = -1;  // -1: it could not be started
  std::string output;  // stdout and stderr together
};

// Runs argv (argv[0] looked up on PATH) and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

// `sbatch --parsable [--dependency=DEPENDENCY] SCRIPT`; returns the job id. Throws
// std::runtime_error with sbatch's own message when it is missing or refuses the job.
std::string sbatch_submit(const std::filesystem::path& script, const std::string& dependency = "");

}  // namespace prefetchlab::apps
