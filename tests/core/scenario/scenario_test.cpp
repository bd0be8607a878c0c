// Scenario loading end to end: bundled references, defaults, --set overrides, and DeepSpeed's
// own adaptive switch mapped onto the controller section.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/cli_runner.hpp"
#include "core/scenario/scenario.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::TempDir;

namespace {

const pc::BundledData kBundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);

pc::Scenario load(const std::string& text, const std::vector<std::string>& overrides = {}) {
  TempDir dir("scenario");
  return pc::load_scenario(dir.write("s.yaml", text), overrides, kBundled);
}

const char* kMinimal =
    "model: gpt2-small\n"
    "training: {micro_batch: 2, seq_len: 512}\n"
    "cluster: {hardware: h100-sxm-8x}\n";

}  // namespace

TEST(Scenario, DefaultScenarioIsLlama2OnEightH100WithDeepSpeedDefaults) {
  const pc::Scenario s =
      pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/default.yaml", {}, kBundled);
  EXPECT_EQ(s.model.name, "llama-2-7b");
  EXPECT_EQ(s.model.total_numel(), 6'738'415'616);
  EXPECT_EQ(s.cluster.world_size(), 8);
  EXPECT_EQ(s.cluster.hardware.name, "h100-sxm-8x");
  EXPECT_EQ(s.zero.prefetch_bucket_numel, 50'000'000);
  EXPECT_EQ(s.zero.max_live_numel, 1'000'000'000);
  EXPECT_EQ(s.zero.max_reuse_distance_numel, 1'000'000'000);
  EXPECT_EQ(s.zero.param_persistence_threshold_numel, 100'000);
  EXPECT_EQ(s.controller.policy, pc::ControllerPolicy::kStatic);
  EXPECT_EQ(s.training.seq_len, 4096);
}

TEST(Scenario, DefaultsApplyWhenSectionsAreOmitted) {
  const pc::Scenario s = load(kMinimal);
  EXPECT_EQ(s.training.iterations, 10);
  EXPECT_EQ(s.training.warmup_iterations, 2);
  EXPECT_EQ(s.training.grad_accum, 1);
  EXPECT_EQ(s.training.dtype, pc::DType::kBF16);
  EXPECT_EQ(s.cluster.nodes, 1);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);  // the profile's GPUs per node
  EXPECT_EQ(s.noise.seed, 0u);
  EXPECT_EQ(s.output.dir, "out/s");
  EXPECT_EQ(s.controller.policy, pc::ControllerPolicy::kStatic);
}

TEST(Scenario, SetOverridesReplaceAndAddKeys) {
  const pc::Scenario s = load(kMinimal, {"training.seq_len=1024", "zero.stage3_prefetch_bucket_size=1e6",
                                         "controller.policy=ema_threshold", "cluster.gpus_per_node=4"});
  EXPECT_EQ(s.training.seq_len, 1024);
  EXPECT_EQ(s.zero.prefetch_bucket_numel, 1'000'000);
  EXPECT_EQ(s.controller.policy, pc::ControllerPolicy::kEmaThreshold);
  EXPECT_EQ(s.cluster.world_size(), 4);
}

TEST(Scenario, SetRejectsMalformedAssignments) {
  EXPECT_THROW(load(kMinimal, {"training.seq_len"}), pc::InputError);
  EXPECT_THROW(load(kMinimal, {"training..seq_len=3"}), pc::InputError);
  EXPECT_THROW(load(kMinimal, {"model.x=3"}), pc::InputError);  // model is a value, not a section
}

TEST(Scenario, MultiNodeClusterNeedsANetworkAndMultipliesRanks) {
  const pc::Scenario s = load(
      "model: llama-2-7b\ntraining: {micro_batch: 1, seq_len: 2048}\n"
      "cluster: {hardware: h100-sxm-cluster, nodes: 4}\n");
  EXPECT_EQ(s.cluster.world_size(), 32);
}

TEST(Scenario, PolicyConstantsHaveDocumentedDefaults) {
  const pc::Scenario pr = load(std::string(kMinimal) + "controller: {policy: deepspeed_pr8431}\n");
  // The original PR's behaviour is fixed: every review defect on.
  EXPECT_EQ(pr.controller.agreement, pc::Agreement::kNone);
  EXPECT_EQ(pr.controller.timing, pc::TimingSource::kHostTimers);
  EXPECT_TRUE(pr.controller.sample_during_record);
  EXPECT_FALSE(pr.controller.clamp_initial);
  const pc::Scenario fixed = load(std::string(kMinimal) + "controller: {policy: ema_threshold, timing: host_timers}\n");
  EXPECT_EQ(fixed.controller.agreement, pc::Agreement::kAllReduceMax);
  EXPECT_EQ(fixed.controller.timing, pc::TimingSource::kHostTimers);
  EXPECT_DOUBLE_EQ(fixed.controller.grow_factor, 1.25);
  EXPECT_DOUBLE_EQ(fixed.controller.shrink_factor, 0.9);
  EXPECT_EQ(fixed.controller.update_interval, 10);
  EXPECT_EQ(fixed.controller.min_bucket_numel, 10'000'000);
  EXPECT_EQ(fixed.controller.max_bucket_numel, 500'000'000);
}

TEST(Scenario, DeepSpeedAdaptiveSwitchSelectsEmaThresholdWithItsBounds) {
  const pc::Scenario s = load(std::string(kMinimal) +
                              "zero: {stage3_adaptive_prefetch_bucket_size: true,"
                              " stage3_adaptive_prefetch_min_size: 2e7}\n");
  EXPECT_EQ(s.controller.policy, pc::ControllerPolicy::kEmaThreshold);
  EXPECT_EQ(s.controller.min_bucket_numel, 20'000'000);
  EXPECT_EQ(s.controller.max_bucket_numel, 500'000'000);
}

TEST(Scenario, AdaptiveSwitchContradictionsAreErrors) {
  const std::string zero = "zero: {stage3_adaptive_prefetch_bucket_size: true}\n";
  try {
    load(std::string(kMinimal) + zero + "controller: {policy: static}\n");
    FAIL() << "expected an InputError";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "controller.policy");
    EXPECT_EQ(e.where().line, 5);
  }
  try {
    load(std::string(kMinimal) + zero + "controller:\n  policy: ema_threshold\n  min_bucket_numel: 3e7\n");
    FAIL() << "expected an InputError";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "controller.min_bucket_numel");
    EXPECT_EQ(e.where().line, 7);
  }
  // Agreeing values are fine.
  EXPECT_NO_THROW(load(std::string(kMinimal) + zero +
                       "controller: {policy: ema_threshold, max_bucket_numel: 5e8}\n"));
}

// NVMe offload is not modelled: refused where it is set, not simulated as CPU offload.
TEST(Scenario, NvmeOffloadIsRefusedNamingItsKey) {
  TempDir dir("scenario-nvme");
  const std::string text = std::string(kMinimal) +
                           "zero:\n  offload_optimizer:\n    device: nvme\n    nvme_path: /local_nvme\n";
  try {
    pc::load_scenario(dir.write("s.yaml", text), {}, kBundled);
    ADD_FAILURE() << "NVMe offload was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "zero.offload_optimizer.device");
    EXPECT_EQ(e.where().line, 6);
    EXPECT_NE(std::string(e.problem()).find("not modelled"), std::string::npos) << e.problem();
  }
  // Through a ds_config file: the scenario's ds_config key is named.
  dir.write("ds.json", "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/n\"}}}");
  try {
    pc::load_scenario(dir.write("s2.yaml", std::string(kMinimal) + "zero:\n  ds_config: ds.json\n"), {}, kBundled);
    ADD_FAILURE() << "NVMe offload was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "zero.ds_config");
    EXPECT_NE(std::string(e.problem()).find("offload_param.device"), std::string::npos) << e.problem();
  }
  // CPU offload stays allowed.
  EXPECT_NO_THROW(load(std::string(kMinimal) + "zero:\n  offload_optimizer: {device: cpu}\n"));
}

// model: takes a Hugging Face config.json, relative to the scenario.
TEST(Scenario, ModelMayBeAHuggingFaceConfig) {
  const pc::Scenario s = load(std::string("model: ") + PREFETCHLAB_SOURCE_DIR +
                              "/models/hf/qwen2-7b.json\ntraining: {micro_batch: 1, seq_len: 512}\n"
                              "cluster: {hardware: h100-sxm-8x}\n");
  EXPECT_EQ(s.model.architecture, "qwen2");
  EXPECT_EQ(s.model.total_numel(), 7'615'616'512);
  const bool noted = std::any_of(s.notes.begin(), s.notes.end(),
                                 [](const std::string& n) { return n.find("rope_theta") != std::string::npos; });
  EXPECT_TRUE(noted);
  try {
    load(std::string(kMinimal).replace(0, 17, "model: missing/config.json"));
    ADD_FAILURE() << "a missing config.json was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "model");
    EXPECT_NE(std::string(e.problem()).find("not found"), std::string::npos);
  }
}

// Nodes of any bundled box join into a cluster when the scenario states the network between
// them; without it, a node count above the profile's max_nodes says how to allow it.
TEST(Scenario, ClusterNetworkJoinsNodesOfAOneBoxProfile) {
  const std::string head = "model: gpt2-small\ntraining: {micro_batch: 2, seq_len: 512}\n";
  const pc::Scenario s = load(head + "cluster:\n  hardware: a100-sxm-8x\n  nodes: 2\n  network: {nics_per_node: 4}\n");
  EXPECT_EQ(s.cluster.world_size(), 16);
  ASSERT_TRUE(s.cluster.hardware.network);
  EXPECT_EQ(s.cluster.hardware.network->nics_per_node, 4);
  EXPECT_DOUBLE_EQ(s.cluster.hardware.network->nic_bits_per_s, 200e9);  // the profile's 200 Gb NICs
  try {
    load(head + "cluster:\n  hardware: a100-sxm-8x\n  nodes: 2\n");
    ADD_FAILURE() << "2 nodes of a one-box profile were accepted without a network";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "cluster.nodes");
    EXPECT_EQ(e.where().line, 5);
    EXPECT_NE(e.expected().find("cluster.network"), std::string::npos) << e.expected();
  }
  // A profile without a network (a PCIe workstation) needs both facts.
  try {
    load(head + "cluster:\n  hardware: l40s-8x-pcie4\n  nodes: 2\n  network: {nics_per_node: 2}\n");
    ADD_FAILURE() << "a network without a NIC rate was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "cluster.network.nic_gbit_per_s");
  }
  const pc::Scenario l40s =
      load(head + "cluster:\n  hardware: l40s-8x-pcie4\n  nodes: 3\n  network: {nics_per_node: 2, nic_gbit_per_s: 100}\n");
  EXPECT_EQ(l40s.cluster.world_size(), 24);
  EXPECT_EQ(l40s.cluster.hardware.network->transport_latency_ns, 0);
  // A TCP-class network's latency per crossing beyond NCCL's constants, in microseconds.
  const pc::Scenario tcp = load(head + "cluster:\n  hardware: l40s-8x-pcie4\n  nodes: 3\n  network: "
                                       "{nics_per_node: 2, nic_gbit_per_s: 100, transport_latency_us: 36}\n");
  EXPECT_DOUBLE_EQ(tcp.cluster.hardware.network->transport_latency_ns, 36'000);
  try {
    load(head + "cluster:\n  hardware: l40s-8x-pcie4\n  nodes: 3\n  network: "
                "{nics_per_node: 2, nic_gbit_per_s: 100, transport_latency_us: -1}\n");
    ADD_FAILURE() << "a negative transport latency was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "cluster.network.transport_latency_us");
  }
}

// A misspelt expect: key is told the whole vocabulary and the closest key, not only the keys the
// file happens to hold (issue 45: it listed those as "one of").
TEST(Scenario, MisspeltExpectKeyNamesTheClosestOfEveryKey) {
  try {
    load(std::string(kMinimal) + "expect:\n  status: ok\n  steady_step_tim_ms: [1, 2]\n");
    FAIL() << "expected an InputError";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "expect.steady_step_tim_ms");
    EXPECT_EQ(e.where().line, 6);
    EXPECT_EQ(e.expected().find("one of: status"), std::string::npos) << e.expected();
    EXPECT_NE(e.expected().find("keys this section accepts"), std::string::npos) << e.expected();
    EXPECT_NE(std::string(e.what()).find("did you mean 'steady_step_time_ms'"), std::string::npos) << e.what();
  }
  // A key the file does not hold is still a key: the MoE checks are accepted beside status.
  EXPECT_NO_THROW(load(std::string(kMinimal) + "expect:\n  status: ok\n  trace_invalidation_cost_ms: [0, 1]\n"));
}

// FlashAttention-3 is Hopper-only and has no dropout: a scenario asking for it elsewhere, or with
// a model that trains with attention dropout, is refused naming training.attention.
TEST(Scenario, Flash3RunsOnlyOnHopperWithoutAttentionDropout) {
  const auto refused = [](const std::string& text, const std::string& needle) {
    try {
      load(text);
      ADD_FAILURE() << "flash3 was accepted:\n" << text;
    } catch (const pc::InputError& e) {
      EXPECT_EQ(e.key(), "training.attention");
      EXPECT_NE(std::string(e.problem()).find(needle), std::string::npos) << e.problem();
    }
  };
  const pc::Scenario hopper = load(
      "model: llama-2-7b\ntraining: {micro_batch: 1, seq_len: 4096, attention: flash3}\n"
      "cluster: {hardware: h100-sxm-8x}\n");
  EXPECT_EQ(hopper.training.attention, pc::AttentionImpl::kFlash3);
  EXPECT_NEAR(hopper.cluster.calibration.attention_flash3_efficiency, 616.0 / 989.0, 1e-12);
  EXPECT_NEAR(hopper.cluster.calibration.attention_flash3_backward_efficiency, 561.0 / 989.0, 1e-12);
  refused("model: llama-2-7b\ntraining: {micro_batch: 1, seq_len: 4096, attention: flash3}\n"
          "cluster: {hardware: a100-sxm-8x}\n",
          "runs only on Hopper");
  // GPT-2 trains with attn_pdrop 0.1.
  refused("model: gpt2-small\ntraining: {micro_batch: 1, seq_len: 512, attention: flash3}\n"
          "cluster: {hardware: h100-sxm-8x}\n",
          "no dropout");
  refused("model: llama-2-7b\ntraining: {micro_batch: 1, seq_len: 512, attention: flash3, dtype: fp32}\n"
          "cluster: {hardware: h100-sxm-8x}\n",
          "only fp16 and bf16");
  // A GPU without a measured rate may run it once its rates are calibrated.
  const pc::Scenario calibrated = load(
      "model: llama-2-7b\ntraining: {micro_batch: 1, seq_len: 4096, attention: flash3}\n"
      "cluster:\n  hardware: a100-sxm-8x\n  calibration: {attention_flash3_efficiency: 0.6, "
      "attention_flash3_backward_efficiency: 0.5}\n");
  EXPECT_DOUBLE_EQ(calibrated.cluster.calibration.attention_flash3_efficiency, 0.6);
}

// ZeRO++ changes every all-gather and reduce-scatter; simulated as plain ZeRO-3 it would answer
// for another job, so turning any part of it on is refused naming the key, inline or through a
// ds_config file. Their off values stay accepted.
TEST(Scenario, ZeroPlusPlusIsRefusedWhereItIsTurnedOn) {
  for (const std::string& setting : {std::string("zero_hpz_partition_size: 8"), std::string("zero_quantized_weights: true"),
                                     std::string("zero_quantized_nontrainable_weights: true"),
                                     std::string("zero_quantized_gradients: true")}) {
    const std::string key = setting.substr(0, setting.find(':'));
    try {
      load(std::string(kMinimal) + "zero:\n  " + setting + "\n");
      ADD_FAILURE() << setting << " was accepted";
    } catch (const pc::InputError& e) {
      EXPECT_EQ(e.key(), "zero." + key);
      EXPECT_EQ(e.where().line, 5);
      EXPECT_NE(std::string(e.problem()).find("ZeRO++"), std::string::npos) << e.problem();
      EXPECT_NE(std::string(e.problem()).find("not modelled"), std::string::npos) << e.problem();
    }
  }
  TempDir dir("scenario-zeropp");
  dir.write("ds.json", "{\"zero_optimization\": {\"stage\": 3, \"zero_quantized_weights\": true}}");
  try {
    pc::load_scenario(dir.write("s.yaml", std::string(kMinimal) + "zero:\n  ds_config: ds.json\n"), {}, kBundled);
    ADD_FAILURE() << "qwZ through a ds_config was accepted";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "zero.ds_config");
    EXPECT_NE(std::string(e.problem()).find("zero_quantized_weights"), std::string::npos) << e.problem();
  }
  EXPECT_NO_THROW(load(std::string(kMinimal) +
                       "zero:\n  zero_hpz_partition_size: 1\n  zero_quantized_weights: false\n"
                       "  zero_quantized_gradients: false\n"));
}
