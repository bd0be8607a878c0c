// ZeroConfig: DeepSpeed code defaults, ds_config.json reading ("auto", precedence, top-level
// consistency with the scenario) and every input error naming file, line and key.
#include "core/zero/zero_config.hpp"

#include <gtest/gtest.h>

#include "tests/support/input_error_testing.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/zero/ds_config_file.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;
namespace fs = std::filesystem;

namespace {

const fs::path kDataDir = fs::path(PREFETCHLAB_SOURCE_DIR) / "tests" / "data";

// The facts an HF Trainer run would pass: h = 4096 (Llama-2-7B), bf16, 16 ranks.
pc::TrainingFacts hf_facts() {
  pc::TrainingFacts facts;
  facts.micro_batch = 4;
  facts.grad_accum = 8;
  facts.dtype = pc::DType::kBF16;
  facts.world_size = 16;
  facts.hidden_size = 4096;
  return facts;
}

// A fresh folder per test holding scenario.yaml and any ds_config files.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("prefetchlab_zero_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Loaded {
  pc::ZeroConfig config;
  std::vector<std::string> notes;
};

// Writes scenario.yaml (whose `zero:` map is `zero_yaml`) and loads its zero section.
Loaded load(const TempDir& dir, const std::string& scenario_yaml,
            const pc::TrainingFacts& facts = hf_facts()) {
  const fs::path scenario = dir.write("scenario.yaml", scenario_yaml);
  const pc::YamlSection root = pc::YamlSection::load_file(scenario.string());
  Loaded out;
  out.config = pc::load_zero_config(root.section("zero"), facts, dir.path(), &out.notes);
  return out;
}


// Loads a scenario that refers to ds_config.json with `json`, expecting an InputError.
pc::InputError json_error(const TempDir& dir, const std::string& json,
                          const pc::TrainingFacts& facts = hf_facts()) {
  dir.write("ds_config.json", json);
  return expect_input_error([&] { load(dir, "zero:\n  ds_config: ds_config.json\n", facts); });
}

}  // namespace

TEST(ZeroConfig, DefaultsAreDeepSpeedCodeDefaults) {
  const pc::ZeroConfig z;
  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.prefetch_bucket_numel, 50'000'000);
  EXPECT_EQ(z.max_live_numel, 1'000'000'000);
  EXPECT_EQ(z.max_reuse_distance_numel, 1'000'000'000);
  EXPECT_EQ(z.param_persistence_threshold_numel, 100'000);
  EXPECT_EQ(z.model_persistence_threshold_numel, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(z.module_granularity_threshold, 0);
  EXPECT_FALSE(z.use_all_reduce_for_fetch_params);
  EXPECT_FALSE(z.allgather_sequential);
  EXPECT_EQ(z.partition_stream_chunk_numel, 0);
  EXPECT_TRUE(z.overlap_comm);
  EXPECT_EQ(z.reduce_bucket_numel, 500'000'000);
  EXPECT_EQ(z.allgather_bucket_numel, 500'000'000);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.sub_group_numel, 1'000'000'000);
  EXPECT_EQ(z.zero_hpz_partition_size, 1);
  EXPECT_FALSE(z.zero_quantized_weights);
  EXPECT_FALSE(z.zero_quantized_nontrainable_weights);
  EXPECT_FALSE(z.zero_quantized_gradients);
  EXPECT_FALSE(z.adaptive_prefetch_bucket);
  EXPECT_EQ(z.adaptive_prefetch_min_numel, 10'000'000);
  EXPECT_EQ(z.adaptive_prefetch_max_numel, 500'000'000);
  EXPECT_FALSE(z.log_trace_cache_warnings);
  EXPECT_FALSE(z.gather_16bit_weights_on_model_save);
  EXPECT_FALSE(z.round_robin_gradients);
  EXPECT_TRUE(z.ignore_unused_parameters);
  EXPECT_TRUE(z.memory_efficient_linear);
  EXPECT_EQ(z.effective_prefetch_bucket_numel(), 50'000'000);

  EXPECT_EQ(z.offload_param.device, pc::OffloadDevice::kNone);
  EXPECT_EQ(z.offload_param.nvme_path, "");
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_numel, 100'000'000);
  EXPECT_EQ(z.offload_param.max_in_cpu_numel, 1'000'000'000);
  EXPECT_FALSE(z.offload_param.pin_memory);

  EXPECT_EQ(z.offload_optimizer.device, pc::OffloadDevice::kNone);
  EXPECT_EQ(z.offload_optimizer.nvme_path, "");
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_FALSE(z.offload_optimizer.pin_memory);
  EXPECT_FALSE(z.offload_optimizer.pipeline_read);
  EXPECT_FALSE(z.offload_optimizer.pipeline_write);
  EXPECT_FALSE(z.offload_optimizer.fast_init);
  EXPECT_DOUBLE_EQ(z.offload_optimizer.ratio, 1.0);
  EXPECT_FALSE(z.offload_optimizer.super_offload);
  EXPECT_TRUE(z.offload_optimizer.convert_grad_on_cpu);
  EXPECT_DOUBLE_EQ(z.offload_optimizer.cpuadam_cores_perc, 0.8);
}

TEST(ZeroConfig, EmptyZeroSectionGivesDefaults) {
  TempDir dir;
  const auto loaded = load(dir, "zero: {}\n");
  EXPECT_EQ(pc::zero_config_to_json(loaded.config), pc::zero_config_to_json(pc::ZeroConfig{}));
  EXPECT_TRUE(loaded.notes.empty());
}

TEST(ZeroConfig, JsonUsesDeepSpeedKeyNames) {
  const nlohmann::json j = pc::zero_config_to_json(pc::ZeroConfig{});
  EXPECT_EQ(j.at("stage"), 3);
  EXPECT_EQ(j.at("stage3_prefetch_bucket_size"), 50'000'000);
  EXPECT_EQ(j.at("stage3_max_live_parameters"), 1'000'000'000);
  EXPECT_EQ(j.at("stage3_max_reuse_distance"), 1'000'000'000);
  EXPECT_EQ(j.at("stage3_param_persistence_threshold"), 100'000);
  EXPECT_EQ(j.at("stage3_model_persistence_threshold"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(j.at("reduce_bucket_size"), 500'000'000);
  EXPECT_EQ(j.at("overlap_comm"), true);
  EXPECT_EQ(j.at("stage3_adaptive_prefetch_bucket_size"), false);
  EXPECT_EQ(j.at("stage3_adaptive_prefetch_min_size"), 10'000'000);
  EXPECT_EQ(j.at("stage3_adaptive_prefetch_max_size"), 500'000'000);
  EXPECT_EQ(j.at("stage3_gather_16bit_weights_on_model_save"), false);
  EXPECT_EQ(j.at("offload_param").at("device"), "none");
  EXPECT_TRUE(j.at("offload_param").at("nvme_path").is_null());
  EXPECT_EQ(j.at("offload_optimizer").at("buffer_count"), 4);
  EXPECT_FALSE(j.contains("prefetch_bucket_numel"));
  // Every documented key with a field appears in the JSON with its default.
  for (const auto& doc : pc::zero_config_key_docs()) {
    if (doc.field_name.empty()) continue;
    const auto dot = doc.json_name.find('.');
    const nlohmann::json& value =
        dot == std::string::npos
            ? j.at(doc.json_name)
            : j.at(doc.json_name.substr(0, dot)).at(doc.json_name.substr(dot + 1));
    EXPECT_EQ(value, doc.default_value) << doc.json_name;
  }
}

TEST(ZeroConfig, JsonRoundTripsThroughDsConfig) {
  TempDir dir;
  pc::ZeroConfig z;
  z.prefetch_bucket_numel = 12'345'678;
  z.adaptive_prefetch_bucket = true;
  z.overlap_comm = false;
  z.offload_param.device = pc::OffloadDevice::kNvme;
  z.offload_param.nvme_path = "/nvme";
  z.offload_optimizer.ratio = 0.25;
  nlohmann::json ds;
  ds["zero_optimization"] = pc::zero_config_to_json(z);
  dir.write("ds_config.json", ds.dump(2));
  const auto loaded = load(dir, "zero:\n  ds_config: ds_config.json\n");
  EXPECT_EQ(pc::zero_config_to_json(loaded.config), pc::zero_config_to_json(z));
}

TEST(ZeroConfig, HuggingFaceZero3ExampleResolvesEveryValue) {
  std::vector<std::string> notes;
  const std::string yaml = "zero:\n  ds_config: ds_config_hf_zero3.json\n";
  const pc::YamlSection root = pc::YamlSection::from_node(
      YAML::Load(yaml), std::make_shared<pc::YamlSource>(pc::YamlSource{"scenario.yaml", {}, {}}));
  const pc::ZeroConfig z = pc::load_zero_config(root.section("zero"), hf_facts(), kDataDir, &notes);

  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.prefetch_bucket_numel, 15'099'494);  // int(0.9 * 4096 * 4096)
  EXPECT_EQ(z.effective_prefetch_bucket_numel(), 15'099'494);
  EXPECT_EQ(z.reduce_bucket_numel, 16'777'216);            // 4096^2
  EXPECT_EQ(z.param_persistence_threshold_numel, 40'960);  // 10 * 4096
  EXPECT_EQ(z.max_live_numel, 1'000'000'000);
  EXPECT_EQ(z.max_reuse_distance_numel, 1'000'000'000);
  EXPECT_EQ(z.sub_group_numel, 1'000'000'000);
  EXPECT_TRUE(z.overlap_comm);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.offload_optimizer.device, pc::OffloadDevice::kCpu);
  EXPECT_TRUE(z.offload_optimizer.pin_memory);
  EXPECT_EQ(z.offload_param.device, pc::OffloadDevice::kCpu);
  EXPECT_TRUE(z.offload_param.pin_memory);
  // Keys the file does not set keep DeepSpeed's defaults.
  EXPECT_EQ(z.model_persistence_threshold_numel, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(z.module_granularity_threshold, 0);
  EXPECT_FALSE(z.use_all_reduce_for_fetch_params);
  EXPECT_FALSE(z.allgather_sequential);
  EXPECT_EQ(z.allgather_bucket_numel, 500'000'000);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.zero_hpz_partition_size, 1);
  EXPECT_FALSE(z.zero_quantized_weights);
  EXPECT_FALSE(z.zero_quantized_nontrainable_weights);
  EXPECT_FALSE(z.zero_quantized_gradients);
  EXPECT_FALSE(z.adaptive_prefetch_bucket);
  EXPECT_EQ(z.adaptive_prefetch_min_numel, 10'000'000);
  EXPECT_EQ(z.adaptive_prefetch_max_numel, 500'000'000);
  EXPECT_FALSE(z.log_trace_cache_warnings);
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_numel, 100'000'000);
  EXPECT_EQ(z.offload_param.max_in_cpu_numel, 1'000'000'000);
  EXPECT_EQ(z.offload_param.nvme_path, "");
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_DOUBLE_EQ(z.offload_optimizer.ratio, 1.0);

  const std::vector<std::string> expected_notes{
      "ds_config key optimizer has no effect on ZeRO-3 fetch timing",
      "ds_config key scheduler has no effect on ZeRO-3 fetch timing",
      "ds_config key gradient_clipping has no effect on ZeRO-3 fetch timing",
      "ds_config key steps_per_print has no effect on ZeRO-3 fetch timing",
      "ds_config key wall_clock_breakdown has no effect on ZeRO-3 fetch timing",
      "ds_config key zero_optimization.sub_group_size has no effect on ZeRO-3 fetch timing "
      "(optimizer-step tiling only)",
      "ds_config key zero_optimization.stage3_gather_16bit_weights_on_model_save has no effect "
      "on ZeRO-3 fetch timing (checkpoint saving only)",
  };
  EXPECT_EQ(notes, expected_notes);
}

TEST(ZeroConfig, AutoFollowsHiddenSize) {
  TempDir dir;
  auto facts = hf_facts();
  facts.hidden_size = 768;  // BERT-base / GPT-2
  dir.write("ds_config.json", R"({"zero_optimization": {"stage": 3,
      "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto"}})");
  const auto z = load(dir, "zero:\n  ds_config: ds_config.json\n", facts).config;
  EXPECT_EQ(z.reduce_bucket_numel, 589'824);
  EXPECT_EQ(z.prefetch_bucket_numel, 530'841);  // int(530841.6)
  EXPECT_EQ(z.param_persistence_threshold_numel, 7'680);
}

TEST(ZeroConfig, InlineKeysOverrideTheFileWhichOverridesDefaults) {
  TempDir dir;
  dir.write("ds_config.json", R"({
  "zero_optimization": {
    "stage": 3,
    "stage3_prefetch_bucket_size": 1e7,
    "stage3_max_live_parameters": 2e8,
    "offload_param": {"device": "cpu", "pin_memory": true}
  }
})");
  const auto z = load(dir,
                      "zero:\n"
                      "  ds_config: ds_config.json\n"
                      "  stage3_prefetch_bucket_size: \"5e6\"\n"
                      "  offload_param:\n"
                      "    pin_memory: false\n")
                     .config;
  EXPECT_EQ(z.prefetch_bucket_numel, 5'000'000);               // inline
  EXPECT_EQ(z.max_live_numel, 200'000'000);                    // file
  EXPECT_EQ(z.max_reuse_distance_numel, 1'000'000'000);        // default
  EXPECT_EQ(z.offload_param.device, pc::OffloadDevice::kCpu);  // file
  EXPECT_FALSE(z.offload_param.pin_memory);                    // inline, key by key
}

TEST(ZeroConfig, SizesAcceptScientificPlainAndQuotedForms) {
  TempDir dir;
  const auto z = load(dir,
                      "zero:\n"
                      "  stage3_prefetch_bucket_size: 5e7\n"
                      "  stage3_max_live_parameters: 50000000\n"
                      "  stage3_max_reuse_distance: \"5e7\"\n"
                      "  reduce_bucket_size: 1.5e8\n")
                     .config;
  EXPECT_EQ(z.prefetch_bucket_numel, 50'000'000);
  EXPECT_EQ(z.max_live_numel, 50'000'000);
  EXPECT_EQ(z.max_reuse_distance_numel, 50'000'000);
  EXPECT_EQ(z.reduce_bucket_numel, 150'000'000);
}

TEST(ZeroConfig, PydanticFieldNamesAreAcceptedAsAliases) {
  TempDir dir;
  const auto z = load(dir,
                      "zero:\n"
                      "  prefetch_bucket_size: 123\n"
                      "  gather_16bit_weights_on_model_save: true\n"
                      "  adaptive_prefetch_bucket_size: true\n")
                     .config;
  EXPECT_EQ(z.prefetch_bucket_numel, 123);
  EXPECT_TRUE(z.gather_16bit_weights_on_model_save);
  EXPECT_TRUE(z.adaptive_prefetch_bucket);
}

TEST(ZeroConfig, AllgatherSequentialForcesBucketOfOneWithNote) {
  TempDir dir;
  const auto loaded = load(dir, "zero:\n  stage3_allgather_sequential: true\n");
  EXPECT_EQ(loaded.config.prefetch_bucket_numel, 50'000'000);
  EXPECT_EQ(loaded.config.effective_prefetch_bucket_numel(), 1);
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_NE(loaded.notes[0].find("prefetch bucket to 1"), std::string::npos);
}

TEST(ZeroConfig, DeprecatedCpuOffloadSwitchesMapToOffloadSections) {
  TempDir dir;
  const auto loaded = load(dir, "zero:\n  cpu_offload: true\n  cpu_offload_param: true\n");
  EXPECT_EQ(loaded.config.offload_optimizer.device, pc::OffloadDevice::kCpu);
  EXPECT_EQ(loaded.config.offload_param.device, pc::OffloadDevice::kCpu);
  EXPECT_EQ(loaded.notes.size(), 2u);
}

TEST(ZeroConfig, AcceptedKeysWithoutEffectAddNotes) {
  TempDir dir;
  const auto loaded =
      load(dir, "zero:\n  allgather_bucket_size: 2e8\n  load_from_fp32_weights: false\n");
  EXPECT_EQ(loaded.config.allgather_bucket_numel, 200'000'000);
  const std::vector<std::string> expected{
      "scenario key zero.allgather_bucket_size has no effect on ZeRO-3 fetch timing (not used by "
      "stage-3 parameter fetch (DeepSpeed #6420))",
      "scenario key zero.load_from_fp32_weights has no effect on ZeRO-3 fetch timing (checkpoint "
      "loading only)"};
  EXPECT_EQ(loaded.notes, expected);
}

// yaml-cpp 0.7 reads tab-indented JSON even without detab_json (checked); this file keeps both
// the reader and the guard honest.
TEST(DsConfigFile, TabIndentedJsonIsRead) {
  std::vector<std::string> notes;
  const std::string yaml = "zero:\n  ds_config: ds_config_tabs.json\n";
  const pc::YamlSection root = pc::YamlSection::from_node(
      YAML::Load(yaml), std::make_shared<pc::YamlSource>(pc::YamlSource{"scenario.yaml", {}, {}}));
  const pc::ZeroConfig z = pc::load_zero_config(root.section("zero"), hf_facts(), kDataDir, &notes);
  EXPECT_EQ(z.prefetch_bucket_numel, 20'000'000);
  EXPECT_EQ(z.offload_param.device, pc::OffloadDevice::kNvme);
  EXPECT_EQ(z.offload_param.nvme_path, "/local\tnvme");  // the escape inside the string survives
}

TEST(DsConfigFile, DetabLeavesStringsAndLinesAlone) {
  EXPECT_EQ(pc::detab_json("{\n\t\"a\\\"\t\": 1\n}"), "{\n \"a\\\"\t\": 1\n}");
}

// A ds_config.json or config.json is JSON as RFC 8259 writes it: comments, YAML tags, single
// quotes, a byte-order mark or duplicate keys (which YAML's reader would take) are refused
// naming the file and line (issue 46, W4).
TEST(DsConfigFile, OnlyStrictJsonIsRead) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"{\"zero_optimization\": {\"stage\": 3}}\n// a comment\n", "is not valid JSON"},
      {"{\"zero_optimization\": {\"stage\": 3, # a comment\n \"overlap_comm\": true}}", "is not valid JSON"},
      {"{\"zero_optimization\": !!map {\"stage\": 3}}", "is not valid JSON"},
      {"{'zero_optimization': {'stage': 3}}", "is not valid JSON"},
      {"{\"zero_optimization\": {\"stage\": 3,}}", "is not valid JSON"},
      {"\xEF\xBB\xBF{\"zero_optimization\": {\"stage\": 3}}", "byte-order mark"},
      {"{\"zero_optimization\": {\"stage\": 3,\n\"stage\": 3}}", "appears twice"},
      // Well-formed, but no double holds it (a fuzzer's find: it escaped the syntax check).
      {"{\"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 1e999}}", "this reader can hold"},
  };
  for (const auto& [text, problem] : bad) {
    TempDir dir;
    dir.write("ds_config.json", text);
    try {
      load(dir, "zero:\n  ds_config: ds_config.json\n");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const pc::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << text << "\n" << e.what();
      EXPECT_NE(std::string(e.what()).find("ds_config.json"), std::string::npos) << e.what();
    }
  }
}

TEST(DsConfigFile, CompactJsonIsRead) {
  TempDir dir;
  dir.write(
      "ds_config.json",
      R"({"zero_optimization":{"stage":3,"stage3_max_live_parameters":3e8,"overlap_comm":false}})");
  const auto z = load(dir, "zero:\n  ds_config: ds_config.json\n").config;
  EXPECT_EQ(z.max_live_numel, 300'000'000);
  EXPECT_FALSE(z.overlap_comm);
}

TEST(DsConfigFile, ExplicitValuesMatchingTheScenarioAreAccepted) {
  TempDir dir;
  dir.write("ds_config.json", R"({
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "train_batch_size": 512,
  "bf16": {"enabled": true},
  "fp16": {"enabled": false, "loss_scale": 0},
  "communication_data_type": "fp32",
  "zero_optimization": {"stage": 3}
})");
  const auto loaded = load(dir, "zero:\n  ds_config: ds_config.json\n");
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_EQ(loaded.notes[0],
            "ds_config key communication_data_type has no effect on ZeRO-3 fetch timing "
            "(parameters are gathered in their own dtype)");
}

// ---- Bad input: every error names file, line and key. ----

TEST(ZeroConfigErrors, UnknownZeroKeyInJsonSuggestsClosest) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {
    "stage": 3,
    "stage3_prefetch_bucket_sise": 5e7
  }
})");
  EXPECT_EQ(e.where().file, (dir.path() / "ds_config.json").string());
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.key(), "zero_optimization.stage3_prefetch_bucket_sise");
  EXPECT_EQ(e.suggestion(), "stage3_prefetch_bucket_size");
}

TEST(ZeroConfigErrors, UnknownInlineZeroKeyNamesScenarioFile) {
  TempDir dir;
  const auto e = expect_input_error(
      [&] { load(dir, "zero:\n  overlap_comm: true\n  stage3_max_live_paramters: 1e9\n"); });
  EXPECT_EQ(e.where().file, (dir.path() / "scenario.yaml").string());
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.stage3_max_live_paramters");
  EXPECT_EQ(e.suggestion(), "stage3_max_live_parameters");
}

TEST(ZeroConfigErrors, WrongType) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": "sometimes"
  }
})");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.key(), "zero_optimization.overlap_comm");
  EXPECT_EQ(e.expected(), "true or false");
}

TEST(ZeroConfigErrors, NegativeSize) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {
    "stage": 3,

    "reduce_bucket_size": -5
  }
})");
  EXPECT_EQ(e.where().file, (dir.path() / "ds_config.json").string());
  EXPECT_EQ(e.where().line, 5);
  EXPECT_EQ(e.key(), "zero_optimization.reduce_bucket_size");
}

TEST(ZeroConfigErrors, FractionalSize) {
  TempDir dir;
  const auto e = json_error(dir,
                            "{\"zero_optimization\": {\"stage\": 3,\n"
                            "  \"stage3_prefetch_bucket_size\": 15099494.4}}");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "zero_optimization.stage3_prefetch_bucket_size");
}

TEST(ZeroConfigErrors, AutoWhereDeepSpeedHasNoAuto) {
  TempDir dir;
  const auto e =
      expect_input_error([&] { load(dir, "zero:\n  stage3_max_live_parameters: auto\n"); });
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "zero.stage3_max_live_parameters");
}

TEST(ZeroConfigErrors, AutoWithoutHiddenSize) {
  TempDir dir;
  auto facts = hf_facts();
  facts.hidden_size = 0;
  const auto e =
      expect_input_error([&] { load(dir, "zero:\n  reduce_bucket_size: auto\n", facts); });
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "zero.reduce_bucket_size");
}

TEST(ZeroConfigErrors, StageTwoIsRejected) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {
    "stage": 2
  }
})");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero_optimization.stage");
  EXPECT_NE(e.problem().find("stage 3"), std::string::npos);
}

TEST(ZeroConfigErrors, MissingStageInDsConfig) {
  TempDir dir;
  const auto e = json_error(dir, R"({"zero_optimization": {"overlap_comm": true}})");
  EXPECT_EQ(e.where().file, (dir.path() / "scenario.yaml").string());
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "zero.ds_config");
}

TEST(ZeroConfigErrors, AdaptiveMinAboveMax) {
  TempDir dir;
  dir.write("ds_config.json", R"({"zero_optimization": {"stage": 3,
    "stage3_adaptive_prefetch_max_size": 2e8}})");
  const auto e = expect_input_error([&] {
    load(dir, "zero:\n  ds_config: ds_config.json\n  stage3_adaptive_prefetch_min_size: 3e8\n");
  });
  EXPECT_EQ(e.where().file, (dir.path() / "scenario.yaml").string());
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.stage3_adaptive_prefetch_min_size");
}

TEST(ZeroConfigErrors, MicroBatchContradictsScenario) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 3}
})");
  EXPECT_EQ(e.where().file, (dir.path() / "ds_config.json").string());
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "train_micro_batch_size_per_gpu");
  EXPECT_NE(e.problem().find("is 4"), std::string::npos);  // the scenario value
}

TEST(ZeroConfigErrors, GradAccumContradictsScenario) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {"stage": 3},
  "gradient_accumulation_steps": 1
})");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "gradient_accumulation_steps");
  EXPECT_NE(e.problem().find("is 8"), std::string::npos);
}

TEST(ZeroConfigErrors, Bf16DisabledWhileTrainingInBf16) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "bf16": {
    "enabled": false
  },
  "zero_optimization": {"stage": 3}
})");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "bf16.enabled");
  EXPECT_NE(e.problem().find("bf16"), std::string::npos);
}

TEST(ZeroConfigErrors, Fp16EnabledWhileTrainingInBf16) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "fp16": {"enabled": true},
  "zero_optimization": {"stage": 3}
})");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "fp16.enabled");
}

TEST(ZeroConfigErrors, TrainBatchSizeInconsistent) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "train_micro_batch_size_per_gpu": "auto",
  "train_batch_size": 64,
  "zero_optimization": {"stage": 3}
})");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "train_batch_size");
  EXPECT_NE(e.problem().find("512"), std::string::npos);  // 4 x 8 x 16
}

TEST(ZeroConfigErrors, UnknownTopLevelKeySuggestsClosest) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {"stage": 3},
  "gradient_cliping": 1.0
})");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "gradient_cliping");
  EXPECT_EQ(e.suggestion(), "gradient_clipping");
}

TEST(ZeroConfigErrors, UnknownOffloadDeviceSuggestsClosest) {
  TempDir dir;
  const auto e =
      expect_input_error([&] { load(dir, "zero:\n  offload_param:\n    device: gpu\n"); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.offload_param.device");
  EXPECT_EQ(e.suggestion(), "cpu");
}

TEST(ZeroConfigErrors, NvmeOffloadWithoutPath) {
  TempDir dir;
  const auto e =
      expect_input_error([&] { load(dir, "zero:\n  offload_optimizer:\n    device: nvme\n"); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.offload_optimizer.device");
}

TEST(ZeroConfigErrors, TwoNamesForOneOption) {
  TempDir dir;
  const auto e = expect_input_error(
      [&] { load(dir, "zero:\n  stage3_prefetch_bucket_size: 1\n  prefetch_bucket_size: 2\n"); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.prefetch_bucket_size");
}

TEST(ZeroConfigErrors, MissingDsConfigFile) {
  TempDir dir;
  const auto e = expect_input_error(
      [&] { load(dir, "name: x\nzero:\n  ds_config: nowhere/ds_config.json\n"); });
  EXPECT_EQ(e.where().file, (dir.path() / "scenario.yaml").string());
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.ds_config");
  EXPECT_NE(e.problem().find("nowhere/ds_config.json"), std::string::npos);
}

TEST(ZeroConfigErrors, MalformedJsonNamesLineOfSyntaxError) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "train_micro_batch_size_per_gpu": 4,
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true
    "contiguous_gradients": true
  }
})");
  EXPECT_EQ(e.where().file, (dir.path() / "ds_config.json").string());
  EXPECT_EQ(e.where().line, 6);
  EXPECT_EQ(e.key(), "");
}

TEST(ZeroConfigErrors, DuplicateJsonKey) {
  TempDir dir;
  const auto e = json_error(dir, R"({
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "overlap_comm": false
  }
})");
  EXPECT_EQ(e.where().line, 5);
  EXPECT_EQ(e.key(), "zero_optimization.overlap_comm");
}

TEST(ZeroConfigErrors, WindowsLineEndingsKeepLineNumbers) {
  TempDir dir;
  const auto e = json_error(dir,
                            "{\r\n  \"zero_optimization\": {\r\n    \"stage\": 3,\r\n    "
                            "\"sub_group_size\": \"big\"\r\n  }\r\n}\r\n");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.key(), "zero_optimization.sub_group_size");
}

TEST(ZeroConfigErrors, AdaptiveMaxBelowFileMinBlamesTheLaterKey) {
  TempDir dir;
  dir.write("ds_config.json", R"({"zero_optimization": {"stage": 3,
    "stage3_adaptive_prefetch_min_size": 2e7}})");
  const auto e = expect_input_error([&] {
    load(dir, "zero:\n  ds_config: ds_config.json\n  stage3_adaptive_prefetch_max_size: 1e7\n");
  });
  EXPECT_EQ(e.where().file, (dir.path() / "scenario.yaml").string());
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "zero.stage3_adaptive_prefetch_max_size");
}

TEST(ZeroConfig, NullMeansDeepSpeedsNoneForOptionalKeys) {
  TempDir dir;
  dir.write("ds_config.json", R"({"zero_optimization": {"stage": 3, "overlap_comm": null,
    "cpu_offload": null, "offload_param": null}})");
  const auto z = load(dir, "zero:\n  ds_config: ds_config.json\n").config;
  EXPECT_TRUE(z.overlap_comm);  // None -> true for stage 3
  EXPECT_EQ(z.offload_optimizer.device, pc::OffloadDevice::kNone);
  EXPECT_EQ(z.offload_param.device, pc::OffloadDevice::kNone);
}
