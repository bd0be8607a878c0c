#pragma once
// `validate|calibrate --launcher env`: this process is one rank of a job launched by torchrun,
// srun or a shell loop (gpu_backend/process/launch_env.hpp); it joins the others through rank 0's store
// (gpu_backend/process/process_link.hpp). `--launcher threads` (the default) runs every rank as a thread
// of this process instead.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/process/process_transport.hpp"

namespace prefetchlab::apps {

struct LauncherOptions {
  std::string launcher = "threads";
  std::optional<double> rank_timeout_s;      // a rank silent in a collective this long fails the job (60)
  std::optional<std::string> process_data;  // the host device's data path between processes (auto)

  gpu::host::ProcessDataPath data_path() const {
    return *gpu::host::parse_process_data_path(process_data.value_or("auto"));
  }
  std::chrono::milliseconds rank_timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(rank_timeout_s.value_or(60) * 1000));
  }
  bool any_given() const { return launcher != "threads" || rank_timeout_s || process_data; }
};

void add_launcher_options(CLI::App* command, LauncherOptions& options);

// The device group a command runs its ranks on: `options` with the launcher's settings when
// `link` is set (this process's rank only, its timeout and data path). What the backend cannot
// run here, or shared memory across nodes, is bad input.
std::unique_ptr<gpu::DeviceGroup> make_command_device_group(gpu::Backend backend, gpu::DeviceGroupOptions options,
                                                            const LauncherOptions& launcher, gpu::ProcessLink* link);

// With --launcher env: joins the job (rank 0 serves its store). `backend` is "host" or "cuda":
// --rank-timeout without --launcher env, and --process-data without it or on cuda, are bad input
// (they would change nothing). `run` names what this rank runs,
// with the scenario file's digest: every rank's must be the same. Null with --launcher threads.
// Throws core::InputError for a launch environment that is missing or wrong, or ranks that
// disagree; std::runtime_error when rank 0 cannot be reached.
std::unique_ptr<gpu::ProcessLink> join_process_job(const LauncherOptions& options, const std::string& backend,
                                                   const std::string& command, const std::string& scenario_path,
                                                   const std::vector<std::string>& arguments);

}  // namespace prefetchlab::apps
