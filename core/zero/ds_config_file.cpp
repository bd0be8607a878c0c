#include "core/zero/ds_config_file.hpp"

#include "core/input/json_section.hpp"

#include <string_view>

namespace prefetchlab::core {
namespace {

// Real DeepSpeed top-level keys that do not change ZeRO-3 fetch timing, with why (if useful).
struct NoEffectKey {
  std::string_view name;
  std::string_view why;
};
constexpr NoEffectKey kNoEffectKeys[] = {
    {"optimizer", ""},
    {"scheduler", ""},
    {"gradient_clipping", ""},
    {"steps_per_print", ""},
    {"wall_clock_breakdown", ""},
    {"memory_breakdown", ""},
    {"zero_allow_untested_optimizer", ""},
    {"zero_force_ds_cpu_optimizer", ""},
    {"communication_data_type", "parameters are gathered in their own dtype"},
    {"seq_parallel_comm_data_type", ""},
    {"prescale_gradients", ""},
    {"gradient_predivide_factor", ""},
    {"sparse_gradients", ""},
    {"amp", ""},
    {"graph_harvesting", ""},
    {"disable_allgather", "stage 1/2 only"},
    {"dump_state", ""},
    {"vocabulary_size", ""},
    {"eigenvalue", ""},
    {"progressive_layer_drop", ""},
    {"checkpoint", ""},
    {"data_types", ""},
    {"dataloader_drop_last", ""},
    {"use_data_before_expert_parallelism", ""},
    {"activation_checkpointing", "PrefetchLab takes activation checkpointing from the scenario"},
    {"flops_profiler", ""},
    {"tensorboard", ""},
    {"wandb", ""},
    {"csv_monitor", ""},
    {"comet", ""},
    {"comms_logger", ""},
    {"aio", ""},
    {"elasticity", ""},
    {"autotuning", ""},
    {"compression_training", ""},
    {"data_efficiency", ""},
    {"curriculum_learning", ""},
    {"sparse_attention", ""},
    {"nebula", ""},
    {"weight_quantization", ""},
    {"hybrid_engine", ""},
    {"compile", ""},
    {"timers", ""},
    {"torch_autocast", ""},
    {"tensor_parallel", ""},
    {"pipeline", ""},
    {"expert_parallel", ""},
};

// The training dtype as DeepSpeed's config names it (model_spec's dtype_name lives elsewhere).
std::string precision_text(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
    case DType::kFP32:
      return "fp32";
  }
  return "?";
}

// A batch-size key: "auto" takes the scenario's value; a number must equal it.
void check_batch_key(const YamlSection& root, std::string_view key, std::int64_t scenario_value,
                     const std::string& what) {
  root.mark_known(key);
  if (!root.has(key)) return;
  const YAML::Node node = root.raw(key);
  if (node.IsScalar() && node.Scalar() == "auto") return;
  const std::string expected = std::to_string(scenario_value) + " or \"auto\"";
  if (!node.IsScalar()) root.fail(key, "is not a number", expected);
  const std::int64_t value = root.require_int(key, 1, std::numeric_limits<std::int64_t>::max());
  if (value != scenario_value) {
    root.fail(key,
              "is " + std::to_string(value) + " but the scenario's " + what + " is " +
                  std::to_string(scenario_value),
              expected);
  }
}

// bf16 / fp16 sections: `enabled` ("auto" or a bool; missing means false, as in DeepSpeed)
// must agree with the scenario's training dtype. Other keys are loss-scaling details.
void check_precision(const YamlSection& root, std::string_view key, bool scenario_enabled,
                     DType dtype, std::initializer_list<std::string_view> other_keys) {
  root.mark_known(key);
  if (!root.has(key)) return;
  const YamlSection sec = root.section(key);
  for (const auto name : other_keys) sec.mark_known(name);
  bool enabled = false;
  sec.mark_known("enabled");
  if (sec.has("enabled")) {
    const YAML::Node node = sec.raw("enabled");
    if (node.IsScalar() && node.Scalar() == "auto") {
      enabled = scenario_enabled;
    } else {
      enabled = sec.require_bool("enabled");
    }
  }
  if (enabled != scenario_enabled) {
    const std::string problem = std::string("is ") + (enabled ? "true" : "false") +
                                " but the scenario trains in " + precision_text(dtype);
    const std::string expected = std::string(scenario_enabled ? "true" : "false") + " or \"auto\"";
    if (sec.has("enabled")) sec.fail("enabled", problem, expected);
    root.fail(key,
              "has no \"enabled\" (DeepSpeed reads false) but the scenario trains in " +
                  precision_text(dtype),
              "\"enabled\": " + expected);
  }
  sec.finish();
}

}  // namespace

YamlSection load_ds_config_json(const std::filesystem::path& file, const InputLocation& reference,
                                const std::string& reference_key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError(reference, reference_key,
                     "names '" + file.string() + "', which does not exist",
                     "a DeepSpeed JSON config, relative to the scenario's folder");
  }
  return load_json_section(file);
}

void check_ds_config_top_level(const YamlSection& root, const TrainingFacts& facts,
                               std::vector<std::string>* notes) {
  root.mark_known("zero_optimization");
  check_batch_key(root, "train_micro_batch_size_per_gpu", facts.micro_batch, "micro batch per GPU");
  check_batch_key(root, "gradient_accumulation_steps", facts.grad_accum,
                  "gradient accumulation steps");
  check_batch_key(root, "train_batch_size", facts.micro_batch * facts.grad_accum * facts.world_size,
                  "global batch (micro batch " + std::to_string(facts.micro_batch) +
                      " x gradient accumulation " + std::to_string(facts.grad_accum) +
                      " x world size " + std::to_string(facts.world_size) + ")");
  if (root.has("bf16") && root.has("bfloat16")) {
    root.fail("bfloat16", "repeats \"bf16\" (its old name)", "only \"bf16\"");
  }
  const std::initializer_list<std::string_view> bf16_keys{
      "immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads",
      "bf16_optimizer_states"};
  check_precision(root, "bf16", facts.dtype == DType::kBF16, facts.dtype, bf16_keys);
  check_precision(root, "bfloat16", facts.dtype == DType::kBF16, facts.dtype, bf16_keys);
  check_precision(
      root, "fp16", facts.dtype == DType::kFP16, facts.dtype,
      {"auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
       "consecutive_hysteresis", "min_loss_scale", "fused_mode", "fp16_master_weights_and_grads"});
  for (const auto& key : kNoEffectKeys) root.mark_known(key.name);
  for (const auto& key : root.keys()) {
    for (const auto& known : kNoEffectKeys) {
      if (known.name != key) continue;
      std::string text = "ds_config key " + key + " has no effect on ZeRO-3 fetch timing";
      if (!known.why.empty()) text += " (" + std::string(known.why) + ")";
      if (notes) notes->push_back(std::move(text));
    }
  }
}

}  // namespace prefetchlab::core
