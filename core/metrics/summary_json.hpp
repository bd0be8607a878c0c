#pragma once
// summary.json: how the run ended, what was run (the fully resolved scenario, the tool version)
// and the steady-state statistics. Key order is fixed (ordered_json), so one run always gives
// the same bytes. Layout:
//   status, exit_code, message, tool{name, version},
//   run{ranks, micro_batch, seq_len, grad_accum, model_flops_per_gpu_iteration, iterations,
//       warmup_iterations, steady_iterations, steady_from_all_iterations},
//   steady_step_time_ns, samples_per_second, tflops_per_gpu, mean_exposed_comm_ns,
//   mean_stall_ns{forward, backward}, peak_gathered_param_bytes, peak_allocated_bytes,
//   peak_reserved_bytes, bucket_trajectory_numel[], scenario{...}
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/metrics/metrics.hpp"

namespace prefetchlab::core {

// `message` says why a run did not end "ok" (the mismatch report, the OOM request, the error);
// it is written as "" otherwise. Write the result with write_json_atomically.
nlohmann::ordered_json summary_to_json(const SummaryStats& stats, RunStatus status,
                                       const nlohmann::ordered_json& resolved_scenario,
                                       std::string_view message = {});

// What summary.json says while a run is under way, written before its first row: status
// "running", the tool and the scenario. The finished run's summary replaces it; a run killed
// before then (kill -9, a full disk) leaves it, so no reader takes the folder's partial rows for
// a finished run.
nlohmann::ordered_json running_summary_json(const nlohmann::ordered_json& resolved_scenario);

}  // namespace prefetchlab::core
