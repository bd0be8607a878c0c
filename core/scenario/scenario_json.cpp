#include "core/scenario/scenario_json.hpp"

#include <cmath>
#include <string>

namespace prefetchlab::core {

nlohmann::ordered_json scenario_to_json(const Scenario& scenario) {
  nlohmann::ordered_json out;
  out["name"] = scenario.name;
  out["model"] = {{"ref", scenario.model_ref},
                  {"name", scenario.model.name},
                  {"architecture", scenario.model.architecture},
                  {"total_numel", scenario.model.total_numel()}};
  const TrainingConfig& t = scenario.training;
  out["training"] = {{"micro_batch", t.micro_batch}, {"seq_len", t.seq_len},
                     {"dtype", dtype_name(t.dtype)}, {"iterations", t.iterations},
                     {"warmup_iterations", t.warmup_iterations}, {"grad_accum", t.grad_accum},
                     {"activation_checkpointing", t.activation_checkpointing},
                     {"attention", attention_impl_name(t.attention)}};
  // A distribution is written beside the longest length (seq_len), which a fixed run keeps alone.
  if (t.seq_len_distribution.kind != SeqLenKind::kFixed) out["training"]["seq_len_distribution"] = t.seq_len_distribution.to_json();
  out["cluster"] = {{"hardware", scenario.cluster.hardware_ref},
                    {"hardware_name", scenario.cluster.hardware.name},
                    {"nodes", scenario.cluster.nodes},
                    {"gpus_per_node", scenario.cluster.gpus_per_node},
                    {"world_size", scenario.cluster.world_size()}};
  if (scenario.cluster.hardware.network) {
    out["cluster"]["network"] = {{"nics_per_node", scenario.cluster.hardware.network->nics_per_node},
                                 {"nic_gbit_per_s", scenario.cluster.hardware.network->nic_bits_per_s / 1e9}};
    if (scenario.cluster.hardware.network->transport_latency_ns > 0) {  // a TCP-class network only
      out["cluster"]["network"]["transport_latency_us"] = scenario.cluster.hardware.network->transport_latency_ns / 1e3;
    }
  }
  const CalibrationConstants& cal = scenario.cluster.calibration;
  nlohmann::ordered_json calibration = {
      {"gemm_efficiency", cal.gemm_efficiency},
      {"memory_efficiency", cal.memory_efficiency},
      {"compute_time_scale", cal.compute_time_scale},
      {"copy_time_scale", cal.copy_time_scale},
      {"cpu_adam_node_elements_per_s", cal.cpu_adam_node_elements_per_s},
      {"contention_compute_factor", cal.contention_compute_factor},
      {"contention_collective_factor", cal.contention_collective_factor},
      {"contention_model", cal.contention_model == CalibrationConstants::ContentionModel::kSharedCores ? "shared_cores"
                                                                                                        : "factors"},
      {"shared_cores", cal.shared_cores},
      {"shared_cores_collective_penalty", cal.shared_cores_collective_penalty},
      {"kernel_launch_ns", cal.kernel_launch_ns},
      {"forward_op_host_ns", cal.forward_op_host_ns},
      {"backward_op_host_ns", cal.backward_op_host_ns},
      {"gemm_backward_rate_ratio", cal.gemm_backward_rate_ratio},
      {"sustained_clock_fraction", cal.sustained_clock_fraction},
      {"kernel_gap_ns", cal.kernel_gap_ns},
      {"attention_efficiency", cal.attention_efficiency},
      {"attention_backward_efficiency", cal.attention_backward_efficiency},
      {"attention_flash3_efficiency", cal.attention_flash3_efficiency},
      {"attention_flash3_backward_efficiency", cal.attention_flash3_backward_efficiency}};
  // Host costs: the speed (JSON has no infinity: a free host is "inf"), then every DeepSpeed
  // host term at host_speed 1.
  calibration["host_speed"] = std::isinf(cal.host_speed) ? nlohmann::ordered_json("inf")
                                                         : nlohmann::ordered_json(cal.host_speed);
  for (const HostTerm& term : host_terms()) calibration[std::string(term.json_key)] = cal.*term.field;
  // Unset overrides mean "derived from the profile's link facts".
  calibration["allgather_bus_bandwidth_bytes_per_s"] =
      cal.allgather_bus_bandwidth_bytes_per_s ? nlohmann::ordered_json(*cal.allgather_bus_bandwidth_bytes_per_s)
                                              : nlohmann::ordered_json("derived");
  calibration["reduce_scatter_bus_bandwidth_bytes_per_s"] =
      cal.reduce_scatter_bus_bandwidth_bytes_per_s
          ? nlohmann::ordered_json(*cal.reduce_scatter_bus_bandwidth_bytes_per_s)
          : nlohmann::ordered_json("derived");
  calibration["collective_latency_ns"] = cal.collective_latency_ns
                                             ? nlohmann::ordered_json(*cal.collective_latency_ns)
                                             : nlohmann::ordered_json("derived");
  // Measured curves only when there are some, so a profile without them writes what it did.
  if (!cal.measured_collectives.empty()) {
    nlohmann::ordered_json curves = nlohmann::ordered_json::array();
    for (const auto& curve : cal.measured_collectives) {
      nlohmann::ordered_json item = {{"op", nccl_tests_op_name(curve.op)}, {"ranks", curve.ranks}};
      item["nodes"] = curve.nodes ? nlohmann::ordered_json(*curve.nodes) : nlohmann::ordered_json("any");
      item["sizes_bytes"] = curve.sizes_bytes;
      item["times_us"] = curve.times_us;
      curves.push_back(item);
    }
    calibration["measured_collectives"] = curves;
  }
  out["cluster"]["calibration"] = calibration;
  out["zero"] = zero_config_to_json(scenario.zero);
  // Only when set, so scenarios without them read as before.
  if (!scenario.leaf_modules.empty()) out["zero"]["leaf_modules"] = scenario.leaf_modules;
  const ControllerConfig& c = scenario.controller;
  nlohmann::ordered_json controller = {{"policy", controller_policy_name(c.policy)}};
  if (c.policy == ControllerPolicy::kPaceSearch) {
    // Only the keys pace_search reads (controller_config.cpp rejects the others for it).
    controller["min_bucket_numel"] = c.min_bucket_numel;
    controller["max_bucket_numel"] = c.max_bucket_numel;
    controller["search_factor"] = c.search_factor;
    controller["memory_budget_bytes"] = c.memory_budget_bytes;
  } else if (c.policy != ControllerPolicy::kStatic) {
    controller["ema_alpha"] = c.ema_alpha;
    controller["grow_threshold"] = c.grow_threshold;
    controller["shrink_threshold"] = c.shrink_threshold;
    controller["grow_factor"] = c.grow_factor;
    controller["shrink_factor"] = c.shrink_factor;
    controller["update_interval"] = c.update_interval;
    controller["min_bucket_numel"] = c.min_bucket_numel;
    controller["max_bucket_numel"] = c.max_bucket_numel;
    controller["agreement"] = agreement_name(c.agreement);
    controller["timing"] = timing_source_name(c.timing);
    controller["sample_during_record"] = c.sample_during_record;
    controller["clamp_initial"] = c.clamp_initial;
  }
  out["controller"] = controller;
  nlohmann::ordered_json slow = nlohmann::ordered_json::object();
  for (const auto& [rank, factor] : scenario.noise.slow_ranks) slow[std::to_string(rank)] = factor;
  out["noise"] = {{"seed", scenario.noise.seed},
                  {"compute_jitter", scenario.noise.compute_jitter},
                  {"slow_ranks", slow},
                  {"host_jitter", scenario.noise.host_jitter},
                  {"host_timer_noise_ns", scenario.noise.host_timer_noise_ns}};
  out["output"] = {{"dir", scenario.output.dir.string()}, {"trace", scenario.output.trace}};
  // Only where they limit something, so a run that keeps everything reads as before.
  if (!scenario.output.trace_ranks.all()) out["output"]["trace_ranks"] = scenario.output.trace_ranks.text;
  if (!scenario.output.trace_iterations.all()) {
    out["output"]["trace_iterations"] = scenario.output.trace_iterations.text;
  }
  if (scenario.output.timeline_budget_bytes > 0) {
    out["output"]["timeline_budget_bytes"] = scenario.output.timeline_budget_bytes;
  }
  nlohmann::ordered_json divergence = nlohmann::ordered_json::array();
  for (const auto& d : scenario.divergence) {
    nlohmann::ordered_json skip = nlohmann::ordered_json::array();
    for (const int m : d.skipped_modules) skip.push_back(scenario.model.modules[static_cast<std::size_t>(m)].name);
    divergence.push_back({{"iteration", d.iteration}, {"skip", skip}, {"ranks", d.ranks}});
  }
  out["divergence"] = divergence;
  if (scenario.moe.enabled) {
    nlohmann::ordered_json moe = {{"routing", moe_routing_name(scenario.moe.routing)}};
    if (scenario.moe.routing == MoeRouting::kZipf) moe["zipf_exponent"] = scenario.moe.zipf_exponent;
    moe["capacity_factor"] = scenario.moe.capacity_factor > 0 ? nlohmann::ordered_json(scenario.moe.capacity_factor)
                                                               : nlohmann::ordered_json(nullptr);
    moe["ranks"] = moe_rank_routing_name(scenario.moe.ranks);
    moe["experts"] = scenario.model.num_experts;
    moe["top_k"] = scenario.model.experts_per_token;
    out["moe"] = moe;
  }
  out["notes"] = scenario.notes;
  return out;
}

}  // namespace prefetchlab::core
