// Bad input through the real command line: every case must exit with code 2 and one message
// naming the file, the line and the dotted key (docs/architecture.md: "Every input error names the file,
// line and key, says what was expected, and suggests the closest valid key").
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"

namespace {

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

struct BadInputCase {
  std::string name;
  std::map<std::string, std::string> files;  // written into a temp dir; "scenario.yaml" is run
  std::string extra_args;
  std::string where;       // "file:line" expected in the message ("--set k" for overrides)
  std::string key;         // dotted key expected as "key '<key>'"; empty if none
  std::string suggestion;  // expected "did you mean '<suggestion>'"; empty if none
};

// A valid scenario whose lines are numbered so each case can change one of them.
std::string scenario(const std::map<int, std::string>& replace = {}, const std::string& append = "") {
  std::vector<std::string> lines{
      "model: gpt2-small",       // 1
      "training:",               // 2
      "  micro_batch: 2",        // 3
      "  seq_len: 512",          // 4
      "  dtype: bf16",           // 5
      "  iterations: 6",         // 6
      "  warmup_iterations: 2",  // 7
      "cluster:",                // 8
      "  hardware: h100-sxm-8x", // 9
      "  gpus_per_node: 8",      // 10
      "zero:",                   // 11
      "  stage3_prefetch_bucket_size: 5e7",  // 12
      "noise:",                  // 13
      "  seed: 3",               // 14
  };
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text + append;
}

std::vector<BadInputCase> scenario_cases() {
  return {
      {"unknown_top_level_key", {{"scenario.yaml", scenario({{2, "trainng:"}})}}, "",
       "scenario.yaml:2", "trainng", "training"},
      {"misspelt_training_key", {{"scenario.yaml", scenario({{4, "  seq_lne: 512"}})}}, "",
       "scenario.yaml:4", "training.seq_lne", "seq_len"},
      {"negative_micro_batch", {{"scenario.yaml", scenario({{3, "  micro_batch: -1"}})}}, "",
       "scenario.yaml:3", "training.micro_batch", ""},
      {"micro_batch_not_a_number", {{"scenario.yaml", scenario({{3, "  micro_batch: two"}})}}, "",
       "scenario.yaml:3", "training.micro_batch", ""},
      {"seq_len_beyond_positions", {{"scenario.yaml", scenario({{4, "  seq_len: 2048"}})}}, "",
       "scenario.yaml:4", "training.seq_len", ""},
      {"unknown_dtype", {{"scenario.yaml", scenario({{5, "  dtype: bf32"}})}}, "",
       "scenario.yaml:5", "training.dtype", "bf16"},
      {"zero_iterations", {{"scenario.yaml", scenario({{6, "  iterations: 0"}})}}, "",
       "scenario.yaml:6", "training.iterations", ""},
      {"warmup_not_below_iterations", {{"scenario.yaml", scenario({{7, "  warmup_iterations: 6"}})}},
       "", "scenario.yaml:7", "training.warmup_iterations", ""},
      // output.trace_ranks / trace_iterations / timeline_budget (8 ranks, 6 iterations here).
      {"trace_rank_outside_world", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: [0, 8]\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_ranks_first_zero", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: first:0\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_ranks_last_form", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: last:2\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_ranks_word", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: all\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_ranks_empty_list", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: []\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_ranks_mapping", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks: {first: 2}\n")}}, "",
       "scenario.yaml:16", "output.trace_ranks", ""},
      {"trace_rank_negative", {{"scenario.yaml", scenario({}, "output:\n  trace_ranks:\n    - 1\n    - -1\n")}}, "",
       "scenario.yaml:18", "output.trace_ranks", ""},
      {"trace_iteration_zero", {{"scenario.yaml", scenario({}, "output:\n  trace_iterations: [0]\n")}}, "",
       "scenario.yaml:16", "output.trace_iterations", ""},
      {"trace_iteration_past_end", {{"scenario.yaml", scenario({}, "output:\n  trace_iterations: [7]\n")}}, "",
       "scenario.yaml:16", "output.trace_iterations", ""},
      {"trace_iterations_bad_count", {{"scenario.yaml", scenario({}, "output:\n  trace_iterations: last:x\n")}},
       "", "scenario.yaml:16", "output.trace_iterations", ""},
      {"timeline_budget_not_a_size", {{"scenario.yaml", scenario({}, "output:\n  timeline_budget: big\n")}}, "",
       "scenario.yaml:16", "output.timeline_budget", ""},
      {"trace_ranks_misspelt", {{"scenario.yaml", scenario({}, "output:\n  trace_rank: [0]\n")}}, "",
       "scenario.yaml:16", "output.trace_rank", "trace_ranks"},
      {"unknown_model_name", {{"scenario.yaml", scenario({{1, "model: gpt2-smal"}})}}, "",
       "scenario.yaml:1", "model", "gpt2-small"},
      {"missing_model_file", {{"scenario.yaml", scenario({{1, "model: ./nowhere.yaml"}})}}, "",
       "scenario.yaml:1", "model", ""},
      {"missing_model_key", {{"scenario.yaml", scenario({{1, "# no model"}})}}, "",
       "scenario.yaml:1", "model", ""},
      {"unknown_hardware", {{"scenario.yaml", scenario({{9, "  hardware: h100-sxm-9x"}})}}, "",
       "scenario.yaml:9", "cluster.hardware", "h100-sxm-8x"},
      {"too_many_gpus_per_node", {{"scenario.yaml", scenario({{10, "  gpus_per_node: 16"}})}}, "",
       "scenario.yaml:10", "cluster.gpus_per_node", ""},
      {"nodes_on_a_single_box", {{"scenario.yaml", scenario({{10, "  nodes: 2"}})}}, "",
       "scenario.yaml:10", "cluster.nodes", ""},
      {"unknown_policy", {{"scenario.yaml", scenario({}, "controller:\n  policy: ema_treshold\n")}},
       "", "scenario.yaml:16", "controller.policy", "ema_threshold"},
      {"key_unused_by_policy",
       {{"scenario.yaml", scenario({}, "controller:\n  policy: static\n  grow_factor: 1.5\n")}}, "",
       "scenario.yaml:17", "controller.grow_factor", ""},
      {"switch_unused_by_pr8431",
       {{"scenario.yaml",
         scenario({}, "controller:\n  policy: deepspeed_pr8431\n  agreement: allreduce_max\n")}},
       "", "scenario.yaml:17", "controller.agreement", ""},
      {"shrink_factor_out_of_range",
       {{"scenario.yaml", scenario({}, "controller:\n  policy: ema_threshold\n  shrink_factor: 1.5\n")}},
       "", "scenario.yaml:17", "controller.shrink_factor", ""},
      {"negative_seed", {{"scenario.yaml", scenario({{14, "  seed: -1"}})}}, "",
       "scenario.yaml:14", "noise.seed", ""},
      {"output_flag_not_bool", {{"scenario.yaml", scenario({}, "output:\n  trace: maybe\n")}}, "",
       "scenario.yaml:16", "output.trace", ""},
      {"yaml_syntax_error", {{"scenario.yaml", scenario({{4, "  seq_len: [512"}})}}, "",
       "scenario.yaml:", "", ""},
      {"duplicate_key", {{"scenario.yaml", scenario({{5, "  seq_len: 256"}})}}, "",
       "scenario.yaml:5", "training.seq_len", ""},
      {"set_override_wrong_type", {{"scenario.yaml", scenario()}}, "--set training.seq_len=abc",
       "--set training.seq_len", "training.seq_len", ""},
      {"set_override_unknown_key", {{"scenario.yaml", scenario()}}, "--set training.seqlen=128",
       "--set training.seqlen", "training.seqlen", "seq_len"},
      {"zero_key_misspelt", {{"scenario.yaml", scenario({{12, "  stage3_prefetch_bucket_sise: 5e7"}})}},
       "", "scenario.yaml:12", "zero.stage3_prefetch_bucket_sise", "stage3_prefetch_bucket_size"},
      {"zero_negative_size", {{"scenario.yaml", scenario({{12, "  stage3_max_live_parameters: -5"}})}},
       "", "scenario.yaml:12", "zero.stage3_max_live_parameters", ""},
      {"zero_stage_two", {{"scenario.yaml", scenario({{12, "  stage: 2"}})}}, "",
       "scenario.yaml:12", "zero.stage", ""},
      {"calibration_unknown_key",
       {{"scenario.yaml", scenario({{10, "  gpus_per_node: 8\n  calibration:\n    kernel_lanch_us: 5"}})}},
       "", "scenario.yaml:12", "cluster.calibration.kernel_lanch_us", "kernel_launch_us"},
      {"calibration_efficiency_above_one",
       {{"scenario.yaml", scenario({{10, "  gpus_per_node: 8\n  calibration:\n    gemm_efficiency: 1.5"}})}},
       "", "scenario.yaml:12", "cluster.calibration.gemm_efficiency", ""},
      {"set_calibration_negative", {{"scenario.yaml", scenario()}},
       "--set cluster.calibration.host_fetch_call_us=-1", "--set cluster.calibration.host_fetch_call_us",
       "cluster.calibration.host_fetch_call_us", ""},
      {"calibration_removed_key",
       {{"scenario.yaml", scenario({{10, "  gpus_per_node: 8\n  calibration:\n    hook_overhead_us: 20"}})}},
       "", "scenario.yaml:12", "cluster.calibration.hook_overhead_us", ""},
  };
}

// Short test names in ctest output instead of a hex dump of the struct.
void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.name; }

// A valid GPT-2 small model file with one line replaced (1-based line numbers).
std::string model_file(const std::map<int, std::string>& replace) {
  const std::vector<std::string> lines{"architecture: gpt2", "head: lm", "hidden_size: 768",
                                       "num_layers: 12", "num_heads: 12", "vocab_size: 50257",
                                       "max_positions: 1024", "tie_embeddings: true"};
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text;
}

// A valid 2-GPU PCIe hardware profile with one line replaced.
std::string hardware_file(const std::map<int, std::string>& replace) {
  const std::vector<std::string> lines{
      "name: two-gpus",                 // 1
      "gpu:",                           // 2
      "  model: test GPU",              // 3
      "  memory: 20GiB",                // 4
      "  bf16_dense_tflops: 107",       // 5
      "  memory_bandwidth_gb_per_s: 360",  // 6
      "  sm_count: 48",                 // 7
      "gpus_per_node: 2",               // 8
      "intra_node_link:",               // 9
      "  kind: pcie",                   // 10
      "  pcie_generation: 4",           // 11
      "  pcie_lanes: 16",               // 12
      "  peer_to_peer: true",           // 13
      "host_link:",                     // 14
      "  pcie_generation: 4",           // 15
      "  pcie_lanes: 16",               // 16
  };
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text;
}

// A ds_config.json (HF style) with one line replaced; the scenario points at it.
std::string ds_config(const std::map<int, std::string>& replace) {
  const std::vector<std::string> lines{
      "{",                                                  // 1
      "  \"train_micro_batch_size_per_gpu\": \"auto\",",     // 2
      "  \"gradient_accumulation_steps\": \"auto\",",        // 3
      "  \"bf16\": {\"enabled\": \"auto\"},",                 // 4
      "  \"zero_optimization\": {",                         // 5
      "    \"stage\": 3,",                                   // 6
      "    \"stage3_prefetch_bucket_size\": \"auto\"",        // 7
      "  }",                                                // 8
      "}",                                                  // 9
  };
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text;
}

std::vector<BadInputCase> file_cases() {
  const std::string with_model = scenario({{1, "model: ./model.yaml"}});
  const std::string with_hardware = scenario({{9, "  hardware: ./hw.yaml"}, {10, "  gpus_per_node: 2"}});
  const std::string with_ds_config = scenario({{12, "  ds_config: ds_config.json"}});
  return {
      {"model_unknown_key", {{"scenario.yaml", with_model}, {"model.yaml", model_file({{3, "hiden_size: 768"}})}},
       "", "model.yaml:3", "hiden_size", "hidden_size"},
      {"model_heads_do_not_divide", {{"scenario.yaml", with_model}, {"model.yaml", model_file({{5, "num_heads: 7"}})}},
       "", "model.yaml:5", "num_heads", ""},
      {"model_zero_layers", {{"scenario.yaml", with_model}, {"model.yaml", model_file({{4, "num_layers: 0"}})}},
       "", "model.yaml:4", "num_layers", ""},
      {"model_unknown_architecture",
       {{"scenario.yaml", with_model}, {"model.yaml", model_file({{1, "architecture: lama"}})}}, "",
       "model.yaml:1", "architecture", "llama"},
      {"hardware_negative_bandwidth",
       {{"scenario.yaml", with_hardware}, {"hw.yaml", hardware_file({{6, "  memory_bandwidth_gb_per_s: -1"}})}},
       "", "hw.yaml:6", "gpu.memory_bandwidth_gb_per_s", ""},
      {"hardware_unknown_link_kind",
       {{"scenario.yaml", with_hardware}, {"hw.yaml", hardware_file({{10, "  kind: pcei"}})}}, "",
       "hw.yaml:10", "intra_node_link.kind", "pcie"},
      {"hardware_nvlink_key_on_pcie",
       {{"scenario.yaml", with_hardware}, {"hw.yaml", hardware_file({{13, "  nvswitch: true"}})}}, "",
       "hw.yaml:13", "intra_node_link.nvswitch", ""},
      {"hardware_bad_pcie_generation",
       {{"scenario.yaml", with_hardware}, {"hw.yaml", hardware_file({{11, "  pcie_generation: 9"}})}}, "",
       "hw.yaml:11", "intra_node_link.pcie_generation", ""},
      {"hardware_calibration_zero_efficiency",
       {{"scenario.yaml", with_hardware},
        {"hw.yaml", hardware_file({{16, "  pcie_lanes: 16\ncalibration:\n  memory_efficiency: 0"}})}},
       "", "hw.yaml:18", "calibration.memory_efficiency", ""},
      {"ds_config_missing_file", {{"scenario.yaml", with_ds_config}}, "", "scenario.yaml:12",
       "zero.ds_config", ""},
      {"ds_config_unknown_top_level_key",
       {{"scenario.yaml", with_ds_config},
        {"ds_config.json", ds_config({{3, "  \"gradient_acumulation_steps\": \"auto\","}})}},
       "", "ds_config.json:3", "gradient_acumulation_steps", "gradient_accumulation_steps"},
      {"ds_config_micro_batch_contradicts_training",
       {{"scenario.yaml", with_ds_config},
        {"ds_config.json", ds_config({{2, "  \"train_micro_batch_size_per_gpu\": 4,"}})}},
       "", "ds_config.json:2", "train_micro_batch_size_per_gpu", ""},
      {"ds_config_bf16_disabled_for_bf16_training",
       {{"scenario.yaml", with_ds_config}, {"ds_config.json", ds_config({{4, "  \"bf16\": {\"enabled\": false},"}})}},
       "", "ds_config.json:4", "bf16.enabled", ""},
      {"ds_config_stage_two",
       {{"scenario.yaml", with_ds_config}, {"ds_config.json", ds_config({{6, "    \"stage\": 2,"}})}}, "",
       "ds_config.json:6", "zero_optimization.stage", ""},
      {"ds_config_malformed_json",
       {{"scenario.yaml", with_ds_config}, {"ds_config.json", ds_config({{7, "    \"stage3_prefetch_bucket_size\" \"auto\""}})}},
       "", "ds_config.json:", "", ""},
  };
}

class BadInput : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInput, ExitsWithCode2AndNamesFileLineKey) {
  const BadInputCase& c = GetParam();
  TempDir dir("bad-input");
  for (const auto& [name, text] : c.files) dir.write(name, text);
  const auto result = run_cli("describe " + (dir.path() / "scenario.yaml").string() + " " + c.extra_args);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(c.where), std::string::npos)
      << "expected location '" << c.where << "' in: " << result.output;
  if (!c.key.empty()) {
    EXPECT_NE(result.output.find("key '" + c.key + "'"), std::string::npos)
        << "expected key '" << c.key << "' in: " << result.output;
  }
  if (!c.suggestion.empty()) {
    EXPECT_NE(result.output.find("did you mean '" + c.suggestion + "'"), std::string::npos)
        << "expected suggestion '" << c.suggestion << "' in: " << result.output;
  }
  EXPECT_NE(result.output.find("expected"), std::string::npos) << result.output;
  // One error, one line: no stack of messages, no crash output.
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
}

std::string case_name(const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Scenario, BadInput, ::testing::ValuesIn(scenario_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(ReferencedFiles, BadInput, ::testing::ValuesIn(file_cases()), case_name);

}  // namespace
