#include "process_job.hpp"

#include <filesystem>

#include "core/input/input_error.hpp"
#include "gpu_backend/process/launch_env.hpp"
#include "search/sweep_manifest.hpp"

namespace prefetchlab::apps {

void add_launcher_options(CLI::App* command, LauncherOptions& options) {
  command
      ->add_option("--launcher", options.launcher,
                   "threads (every rank a thread of this process; default) or env (this process is one rank: RANK, "
                   "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT as torchrun sets them, or srun's SLURM_PROCID)")
      ->check(CLI::IsMember({"threads", "env"}));
  command
      ->add_option("--rank-timeout", options.rank_timeout_s,
                   "seconds a rank may stay away from a collective others wait in before the job fails naming it "
                   "(default 60)")
      ->check(CLI::Range(0.1, 86400.0));
  command
      ->add_option("--process-data", options.process_data,
                   "with --launcher env and --backend host: how collectives' data moves between the processes: shm "
                   "(shared memory; every rank on one node), tcp (through rank 0's store) or auto (shm when every rank "
                   "is on one node; default)")
      ->check(CLI::IsMember({"auto", "shm", "tcp"}));
}

std::unique_ptr<gpu::DeviceGroup> make_command_device_group(gpu::Backend backend, gpu::DeviceGroupOptions options,
                                                            const LauncherOptions& launcher, gpu::ProcessLink* link) {
  if (link) {
    options.process = link;
    options.process_data = launcher.data_path();
    options.collective_timeout = launcher.rank_timeout();
    if (options.process_data == gpu::host::ProcessDataPath::kSharedMemory && !link->same_host()) {
      throw core::InputError({"<command line>", 0}, "--process-data",
                             "is shm but the ranks run on " + std::to_string(link->nodes()) + " nodes",
                             "tcp or auto (shared memory needs every rank on one node)");
    }
  }
  try {
    return gpu::make_device_group(backend, options);
  } catch (const gpu::BackendUnavailable& e) {
    throw core::InputError({"<command line>", 0}, "--backend", e.what(), "a backend this machine can run");
  }
}

std::unique_ptr<gpu::ProcessLink> join_process_job(const LauncherOptions& options, const std::string& backend,
                                                   const std::string& command, const std::string& scenario_path,
                                                   const std::vector<std::string>& arguments) {
  if (options.launcher != "env") {
    if (options.rank_timeout_s || options.process_data) {
      throw core::InputError({"<command line>", 0}, options.rank_timeout_s ? "--rank-timeout" : "--process-data",
                             "is given without --launcher env", "--launcher env (ranks as processes), or leave it out");
    }
    return nullptr;
  }
  if (options.process_data && backend != "host") {
    throw core::InputError({"<command line>", 0}, "--process-data", "is given with --backend " + backend,
                           "--backend host (the cuda device's collectives are NCCL's), or leave it out");
  }
  gpu::LaunchRank me;
  try {
    me = gpu::launch_rank_from_environment();
  } catch (const std::invalid_argument& e) {
    throw core::InputError({"<environment>", 0}, "--launcher env", e.what(),
                           "one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun) or under srun, and "
                           "the job's PREFETCHLAB_JOB_SECRET");
  }
  // What every rank must agree on: the command, the scenario's bytes and the arguments that
  // change the run (overrides, hardware, repeats).
  std::string run = command;
  if (!scenario_path.empty()) {
    run += " " + std::filesystem::path(scenario_path).filename().string();
    if (std::filesystem::is_regular_file(scenario_path)) run += "@" + core::file_digest(scenario_path);
  }
  for (const auto& a : arguments) run += " " + a;
  try {
    return std::make_unique<gpu::ProcessLink>(me, run, options.rank_timeout());
  } catch (const gpu::ProcessJobRefused& e) {
    throw core::InputError({"<environment>", 0}, "--launcher env", e.what(), "every rank launched with the same command, "
                           "scenario and WORLD_SIZE, and a rank number of its own");
  }
}

}  // namespace prefetchlab::apps
