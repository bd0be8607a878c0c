#include "core/metrics/summary_json.hpp"

#include <string>

#include "prefetchlab/version.hpp"

namespace prefetchlab::core {

nlohmann::ordered_json summary_to_json(const SummaryStats& stats, RunStatus status,
                                       const nlohmann::ordered_json& resolved_scenario,
                                       std::string_view message) {
  nlohmann::ordered_json out;
  out["status"] = run_status_name(status);
  out["exit_code"] = run_status_exit_code(status);
  out["message"] = std::string(message);
  out["tool"] = {{"name", "prefetchlab"}, {"version", kVersion}};

  nlohmann::ordered_json run;
  run["ranks"] = stats.facts.ranks;
  run["micro_batch"] = stats.facts.micro_batch;
  run["seq_len"] = stats.facts.seq_len;
  run["grad_accum"] = stats.facts.grad_accum;
  run["model_flops_per_gpu_iteration"] = stats.facts.model_flops_per_gpu_iteration;
  run["iterations"] = stats.iterations;
  run["warmup_iterations"] = stats.warmup_iterations;
  run["steady_iterations"] = stats.steady_iterations;
  run["steady_from_all_iterations"] = stats.steady_from_all_iterations;
  run["steady_optimizer_steps"] = stats.steady_optimizer_steps;
  run["step_time_from_micro_batches"] = stats.step_time_from_micro_batches;
  // Only where lengths vary, so a fixed-length summary reads as it always did.
  if (stats.steady_is_mean_over_lengths) run["steady_is_mean_over_lengths"] = true;
  out["run"] = std::move(run);

  out["steady_step_time_ns"] = stats.steady_step_time_ns;
  out["steady_micro_batch_time_ns"] = stats.steady_micro_batch_time_ns;
  out["samples_per_second"] = stats.samples_per_second;
  out["tokens_per_second"] = stats.tokens_per_second;
  out["tflops_per_gpu"] = stats.tflops_per_gpu;
  out["mean_exposed_comm_ns"] = stats.mean_exposed_comm_ns;
  out["mean_stall_ns"] = {{"forward", stats.mean_forward_stall_ns},
                          {"backward", stats.mean_backward_stall_ns}};
  out["peak_gathered_param_bytes"] = stats.peak_gathered_param_bytes;
  out["peak_allocated_bytes"] = stats.peak_allocated_bytes;
  out["peak_reserved_bytes"] = stats.peak_reserved_bytes;
  out["bucket_trajectory_numel"] = stats.bucket_trajectory_numel;
  // torch.cuda.memory_stats()'s name: mallocs that freed the allocator's cache and retried.
  out["num_alloc_retries"] = stats.num_alloc_retries;
  if (stats.peak_memory) {
    const PeakMemoryBreakdown& p = *stats.peak_memory;
    out["peak_reserved_breakdown"] = {{"rank", p.rank},
                                      {"reserved_bytes", p.reserved_bytes},
                                      {"model_states_bytes", p.model_states_bytes},
                                      {"activation_bytes", p.activation_bytes},
                                      {"gathered_param_bytes", p.gathered_param_bytes},
                                      {"gradient_bytes", p.gradient_bytes},
                                      {"allocator_cache_bytes", p.cache_bytes()}};
  }
  if (stats.trace_invalidations) {
    const TraceInvalidationStats& t = *stats.trace_invalidations;
    out["trace_invalidations"] = {{"total", t.total},
                                  {"per_iteration", t.per_iteration},
                                  {"mean_cost_ns", t.mean_cost_ns},
                                  {"mean_dropped_tokens", t.mean_dropped_tokens}};
  }
  out["scenario"] = resolved_scenario;
  return out;
}

nlohmann::ordered_json running_summary_json(const nlohmann::ordered_json& resolved_scenario) {
  nlohmann::ordered_json out;
  out["status"] = "running";
  out["message"] = "the run has not finished (or was killed before it could say so)";
  out["tool"] = {{"name", "prefetchlab"}, {"version", kVersion}};
  out["scenario"] = resolved_scenario;
  return out;
}

}  // namespace prefetchlab::core
