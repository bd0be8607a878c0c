// The per-kernel compute model: what PyTorch eager launches per module (core/model/module_costs),
// how attention runs (training.attention), how each kernel is priced (sim/compute_model), and
// `describe --costs`. Where ../shared/fidelity/h200-layer-measurements.md exists next to the
// source tree (layer timings on one H200), the large layers are checked against it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "core/model/model_config.hpp"
#include "core/model/module_costs.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/cost/compute_model.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/input_error_testing.hpp"
#include "tests/support/shared_data.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
namespace fs = std::filesystem;
using prefetchlab::testing::expect_input_error;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);

pc::HardwareProfile profile(const std::string& name) {
  return pc::load_hardware_profile(kSourceDir / "hardware" / (name + ".yaml"));
}

pc::ModelSpec model(const std::string& name, pc::AttentionImpl attention) {
  return pc::load_model_file(kSourceDir / "models" / (name + ".yaml"), pc::DType::kBF16, attention);
}

// The measured GPT-2 layers are plain PyTorch modules with one GELU kernel (the file: "GELU
// MLP"; forward_op_host_us was fitted to them counting one), not HF GPT-2's default
// NewGELUActivation, eight kernels: the bundled shapes with activation gelu_pytorch_tanh.
pc::ModelSpec one_kernel_gelu_model(const std::string& name, pc::AttentionImpl attention) {
  TempDir dir("one-kernel-gelu");
  std::ifstream in(kSourceDir / "models" / (name + ".yaml"));
  std::ostringstream text;
  text << in.rdbuf() << "\nactivation: gelu_pytorch_tanh\n";
  const fs::path file = dir.path() / (name + ".yaml");
  std::ofstream(file) << text.str();
  return pc::load_model_file(file, pc::DType::kBF16, attention);
}

const pc::ModuleSpec& module_named(const pc::ModelSpec& spec, const std::string& name) {
  for (const auto& m : spec.modules) {
    if (m.name == name) return m;
  }
  throw std::runtime_error("no module " + name);
}

bool has_module(const pc::ModelSpec& spec, const std::string& name) {
  return std::any_of(spec.modules.begin(), spec.modules.end(), [&](const auto& m) { return m.name == name; });
}

// A layer's forward and backward as one host thread and one stream run them: every kernel of the
// layer's modules (the layer and everything under it) issued at its per-kernel host cost, in
// order (backward: modules in reverse), run back to back.
// One layer's kernels' device times: forward in module order, backward in autograd's.
std::pair<std::vector<ps::TimeNs>, std::vector<ps::TimeNs>> layer_kernels(const ps::ComputeModel& compute,
                                                                          const pc::ModelSpec& spec,
                                                                          const std::string& layer, std::int64_t b,
                                                                          std::int64_t s) {
  std::vector<ps::TimeNs> fwd, bwd;
  for (const auto& m : spec.modules) {
    if (m.name != layer && !m.name.starts_with(layer + ".")) continue;
    const auto f = compute.module_forward_kernel_ns(m, b, s);
    fwd.insert(fwd.end(), f.begin(), f.end());
  }
  for (auto m = spec.modules.rbegin(); m != spec.modules.rend(); ++m) {
    if (m->name != layer && !m->name.starts_with(layer + ".")) continue;
    const auto k = compute.module_backward_kernel_ns(*m, b, s);
    bwd.insert(bwd.end(), k.begin(), k.end());
  }
  return {fwd, bwd};
}

std::pair<ps::TimeNs, ps::TimeNs> layer_ns(const ps::ComputeModel& compute, const pc::ModelSpec& spec,
                                           const std::string& layer, std::int64_t b, std::int64_t s) {
  const auto [fwd, bwd] = layer_kernels(compute, spec, layer, b, s);
  return {compute.stream_ns(fwd, compute.host().forward_op_host_ns()),
          compute.stream_ns(bwd, compute.host().backward_op_host_ns())};
}

// One repetition's time in a run of back-to-back repetitions timed by CUDA events, with one
// synchronisation after the loop (as torch benchmarks commonly time: events per repetition, read
// after the last): the span of 11 passes less one pass's, per pass. Where the device is the bound
// the host runs ahead and its issue stalls vanish after the first pass; where the host is, every
// pass waits for it.
ps::TimeNs steady_ns(const ps::ComputeModel& compute, const std::vector<ps::TimeNs>& pass, ps::TimeNs issue_ns) {
  constexpr int kPasses = 11;
  std::vector<ps::TimeNs> passes;
  for (int i = 0; i < kPasses; ++i) passes.insert(passes.end(), pass.begin(), pass.end());
  return (compute.stream_ns(passes, issue_ns) - compute.stream_ns(pass, issue_ns)) / (kPasses - 1);
}

// A layer's forward and forward + backward as steady_ns times them (forward alone: no backward
// in the loop; forward + backward: one pass runs both, as `y.backward()` after `y = layer(x)`).
std::pair<double, double> layer_steady_ms(const ps::ComputeModel& compute, const pc::ModelSpec& spec,
                                          const std::string& layer, std::int64_t b, std::int64_t s) {
  const auto [fwd, bwd] = layer_kernels(compute, spec, layer, b, s);
  const ps::TimeNs forward = steady_ns(compute, fwd, compute.host().forward_op_host_ns());
  // Forward and backward in one pass: each part issued at its own per-kernel host cost, which
  // stream_ns takes as one interval; the pass's host time is kept by issuing at the mean.
  std::vector<ps::TimeNs> both = fwd;
  both.insert(both.end(), bwd.begin(), bwd.end());
  const auto host_ns = static_cast<double>(fwd.size() * static_cast<std::size_t>(compute.host().forward_op_host_ns()) +
                                           bwd.size() * static_cast<std::size_t>(compute.host().backward_op_host_ns()));
  const auto mean_issue = static_cast<ps::TimeNs>(host_ns / static_cast<double>(both.size()));
  return {static_cast<double>(forward) / 1e6, static_cast<double>(steady_ns(compute, both, mean_issue)) / 1e6};
}

// The H200 layers were measured with PyTorch 2.11, whose sdpa runs cuDNN's fused attention on
// Hopper once the bundled cuDNN is new enough (check_prefer_cudnn_attention in PyTorch's
// aten/src/ATen/native/transformers/cuda/sdp_utils.cpp; huggingface/transformers PR #48163 on
// 2.11), not FlashAttention-2: price attention at cuDNN's H100 rates, causal, head dim 128, at
// 16k tokens: 539 TFLOPS forward, 516 backward (Shah et al. 2024, FlashAttention-3,
// arXiv:2407.08608, figures 5 and 6), as a user with that PyTorch would set them.
// The H200 layer timings as they ran: PyTorch 2.11's sdpa is cuDNN's attention, and 10 timed
// repetitions after 3 warm-ups are a short benchmark at burst clocks (no sustained-load derate).
pc::CalibrationConstants with_cudnn_attention(pc::CalibrationConstants c) {
  c.attention_efficiency = 539.0 / 989.0;
  c.attention_backward_efficiency = 516.0 / 989.0;
  c.sustained_clock_fraction = 1.0;
  return c;
}

template <class F>
void expect_key_error(F action, const std::string& file) {
  const pc::InputError e = expect_input_error(action);
  const std::string text = e.what();
  EXPECT_NE(text.find(file), std::string::npos) << text;
  EXPECT_NE(text.find("attention"), std::string::npos) << text;
}

}  // namespace

TEST(ModuleCosts, HfRmsNormIsEightKernelsMovingAbout38BytesPerElement) {
  const pc::ModuleCosts norm = pc::rms_norm_costs(4096, 2);
  ASSERT_EQ(norm.kernels.size(), 8u);
  std::int64_t bytes = 0;
  for (const auto& k : norm.kernels) {
    EXPECT_EQ(k.kind, pc::KernelKind::kMemory) << k.op;
    bytes += k.bytes.per_token;
  }
  // to fp32 6, pow 8, mean 4, mul 8, to bf16 6, weight 6 bytes per element, plus two scalars.
  EXPECT_EQ(bytes, 38 * 4096 + 16);
}

TEST(ModuleCosts, ModuleTotalsAreTheSumOfItsKernels) {
  const pc::ModelSpec llama = model("llama-2-7b", pc::AttentionImpl::kSdpa);
  const pc::ModuleSpec& attn = module_named(llama, "model.layers.0.self_attn");
  pc::TokenScaled flops;
  pc::TokenScaled bytes;
  for (const auto& k : attn.kernels) {
    flops += k.flops;
    bytes += k.bytes;
  }
  EXPECT_EQ(flops.at(2, 4096), attn.forward_flops.at(2, 4096));
  EXPECT_EQ(bytes.at(2, 4096), attn.forward_bytes.at(2, 4096));
  // RoPE on q and k (5 kernels each), the attention kernel and the output transpose; Llama-2-7B
  // has no grouped-query attention, so no repeat_kv copies.
  EXPECT_EQ(attn.kernels.size(), 12u);
}

TEST(ModuleCosts, AttentionImplementationsDifferInKernelsModulesAndSavedScores) {
  const std::int64_t b = 1;
  const std::int64_t s = 1024;
  const pc::ModelSpec sdpa = model("gpt2-small", pc::AttentionImpl::kSdpa);
  const pc::ModelSpec eager = model("gpt2-small", pc::AttentionImpl::kEager);
  // Eager calls attn_dropout, a module whose hooks fire; sdpa folds dropout into its kernel.
  EXPECT_FALSE(has_module(sdpa, "transformer.h.0.attn.attn_dropout"));
  EXPECT_TRUE(has_module(eager, "transformer.h.0.attn.attn_dropout"));
  EXPECT_EQ(module_named(sdpa, "transformer.h.0.attn").class_name, "GPT2SdpaAttention");
  EXPECT_EQ(module_named(eager, "transformer.h.0.attn").class_name, "GPT2Attention");
  // Eager keeps the s^2 probabilities (Korthikanti: 5 a s^2 b bytes per layer); sdpa keeps none.
  std::int64_t eager_s2 = 0;
  std::int64_t sdpa_s2 = 0;
  for (const auto& m : eager.modules) eager_s2 += m.activation_bytes.per_token_per_position;
  for (const auto& m : sdpa.modules) sdpa_s2 += m.activation_bytes.per_token_per_position;
  EXPECT_EQ(eager_s2, 5 * 12 * 12);  // 12 heads, 12 layers
  EXPECT_EQ(sdpa_s2, 0);

  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel compute(p, p.calibration, pc::DType::kBF16);
  const auto [sdpa_fwd, sdpa_bwd] = layer_ns(compute, sdpa, "transformer.h.0", b, s);
  const auto [eager_fwd, eager_bwd] = layer_ns(compute, eager, "transformer.h.0", b, s);
  EXPECT_GT(eager_fwd, sdpa_fwd);
  EXPECT_GT(eager_bwd, sdpa_bwd);

  // flash-attn takes grouped K/V as they are; sdpa (HF 4.46) expands them with repeat_kv first.
  const pc::ModelSpec flash70 = model("llama-2-70b", pc::AttentionImpl::kFlash);
  const pc::ModelSpec sdpa70 = model("llama-2-70b", pc::AttentionImpl::kSdpa);
  auto ops = [](const pc::ModuleSpec& m) {
    std::vector<std::string> out;
    for (const auto& k : m.kernels) out.push_back(k.op);
    return out;
  };
  const auto flash_ops = ops(module_named(flash70, "model.layers.0.self_attn"));
  const auto sdpa_ops = ops(module_named(sdpa70, "model.layers.0.self_attn"));
  EXPECT_EQ(std::count(flash_ops.begin(), flash_ops.end(), "repeat_kv.k"), 0);
  EXPECT_EQ(std::count(sdpa_ops.begin(), sdpa_ops.end(), "repeat_kv.k"), 1);
  EXPECT_LT(module_named(flash70, "model.layers.0.self_attn").activation_bytes.per_token,
            module_named(sdpa70, "model.layers.0.self_attn").activation_bytes.per_token);
}

TEST(ComputeModel, AttentionSequenceFractionReproducesFlashAttention2OnH100) {
  // Shah et al. 2024 (arXiv:2407.08608), H100 SXM5, head dim 128, FlashAttention-2 TFLOPS at
  // 512..16k tokens: forward (causal) and backward; the fraction is of the 16k value.
  const std::vector<std::int64_t> seq{512, 1024, 2048, 4096, 8192, 16384};
  const std::vector<double> forward{191, 260, 298, 319, 333, 335};
  const std::vector<double> backward{214, 260, 291, 310, 318, 322};
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const double f = ps::ComputeModel::attention_seq_fraction(seq[i], false) /
                     ps::ComputeModel::attention_seq_fraction(16384, false);
    const double g = ps::ComputeModel::attention_seq_fraction(seq[i], true) /
                     ps::ComputeModel::attention_seq_fraction(16384, true);
    EXPECT_NEAR(f, forward[i] / forward.back(), 0.03 * forward[i] / forward.back()) << seq[i];
    EXPECT_NEAR(g, backward[i] / backward.back(), 0.03 * backward[i] / backward.back()) << seq[i];
  }
}

TEST(ComputeModel, Flash3SequenceFractionReproducesFlashAttention3OnH100) {
  // The same figures' FlashAttention-3 TFLOPS (forward causal, backward), H100 SXM5, head dim 128.
  const std::vector<std::int64_t> seq{512, 1024, 2048, 4096, 8192, 16384};
  const std::vector<double> forward{292, 423, 521, 579, 602, 616};
  const std::vector<double> backward{316, 424, 501, 542, 559, 561};
  const auto fa3 = pc::AttentionKernel::kFlash3;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const double f = ps::ComputeModel::attention_seq_fraction(seq[i], false, fa3) /
                     ps::ComputeModel::attention_seq_fraction(16384, false, fa3);
    const double g = ps::ComputeModel::attention_seq_fraction(seq[i], true, fa3) /
                     ps::ComputeModel::attention_seq_fraction(16384, true, fa3);
    EXPECT_NEAR(f, forward[i] / forward.back(), 0.04 * forward[i] / forward.back()) << seq[i];
    EXPECT_NEAR(g, backward[i] / backward.back(), 0.04 * backward[i] / backward.back()) << seq[i];
  }
}

// attention: flash3 prices the same FLOPs at FlashAttention-3's rates: 616 / 335 faster forward
// and 561 / 322 backward at 16k tokens on an H100, and only there.
TEST(ComputeModel, Flash3KernelRunsAtFlashAttention3sRates) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel compute(p, p.calibration, pc::DType::kBF16);
  const pc::ModelSpec fa2 = model("llama-2-7b", pc::AttentionImpl::kFlash);
  const pc::ModelSpec fa3 = model("llama-2-7b", pc::AttentionImpl::kFlash3);
  const auto find_attention = [](const pc::ModuleSpec& m) {
    for (const pc::KernelSpec& k : m.kernels) {
      if (k.kind == pc::KernelKind::kAttention) return k;
    }
    throw std::logic_error("no attention kernel");
  };
  const pc::KernelSpec a2 = find_attention(module_named(fa2, "model.layers.0.self_attn"));
  const pc::KernelSpec a3 = find_attention(module_named(fa3, "model.layers.0.self_attn"));
  EXPECT_EQ(a3.op, "flash_attn_3");
  EXPECT_EQ(a3.attention_kernel, pc::AttentionKernel::kFlash3);
  EXPECT_EQ(a2.attention_kernel, pc::AttentionKernel::kFlash2);
  EXPECT_EQ(a3.flops.per_token_per_position, a2.flops.per_token_per_position);
  const auto ratio = [&](bool backward) {
    const auto ns = [&](const pc::KernelSpec& k) {
      return static_cast<double>(backward ? compute.kernel_backward_ns(k, 1, 16384) : compute.kernel_forward_ns(k, 1, 16384));
    };
    return ns(a2) / ns(a3);
  };
  const auto curve = [](bool backward, pc::AttentionKernel kernel) {
    return ps::ComputeModel::attention_seq_fraction(16384, backward, kernel);
  };
  EXPECT_NEAR(ratio(false), 616.0 / 335.0 * curve(false, pc::AttentionKernel::kFlash3) /
                                curve(false, pc::AttentionKernel::kFlash2), 1e-3);
  EXPECT_NEAR(ratio(true), 561.0 / 322.0 * curve(true, pc::AttentionKernel::kFlash3) /
                               curve(true, pc::AttentionKernel::kFlash2), 1e-3);
  // Without FlashAttention-3's rates (an A100), pricing its kernel is a programming error.
  const auto a100 = profile("a100-sxm-8x");
  const ps::ComputeModel ampere(a100, a100.calibration, pc::DType::kBF16);
  EXPECT_THROW((void)ampere.kernel_forward_ns(a3, 1, 4096), std::invalid_argument);
}

TEST(ComputeModel, AttentionKernelRunsAtTheMeasuredEfficiencyNotTheGemms) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel compute(p, p.calibration, pc::DType::kBF16);
  pc::KernelSpec k;
  k.kind = pc::KernelKind::kAttention;
  k.flops.fixed = 1'000'000'000'000;  // 1 TFLOP
  const double fraction = ps::ComputeModel::attention_seq_fraction(16384, false);
  // 335 TFLOPS at 16k tokens (the FlashAttention-3 paper's FA2 figure) on 989 dense, at the
  // clocks an H100 sustains under training load (708.5 of 841.9: the same tool's sustained
  // against burst GEMM rate on a 700 W Hopper).
  EXPECT_NEAR(p.calibration.sustained_clock_fraction, 708.5 / 841.9, 1e-12);
  EXPECT_NEAR(static_cast<double>(compute.kernel_forward_ns(k, 1, 16384)),
              1e12 / (335e12 * fraction * 708.5 / 841.9) * 1e9, 1e4);
  // A short benchmark runs at burst clocks: 335 TFLOPS.
  pc::CalibrationConstants burst = p.calibration;
  burst.sustained_clock_fraction = 1.0;
  EXPECT_NEAR(static_cast<double>(ps::ComputeModel(p, burst, pc::DType::kBF16).kernel_forward_ns(k, 1, 16384)),
              1e12 / (335e12 * fraction) * 1e9, 1e4);
  pc::KernelSpec gemm = k;
  gemm.kind = pc::KernelKind::kGemm;
  EXPECT_LT(compute.kernel_forward_ns(gemm, 1, 16384), compute.kernel_forward_ns(k, 1, 16384));
}

TEST(ComputeModel, ManySmallKernelsAreBoundByTheHostThatLaunchesThem) {
  const auto p = profile("h100-sxm-8x");
  pc::CalibrationConstants c = p.calibration;
  c.forward_op_host_ns = 20'000;
  c.kernel_gap_ns = 1'000;
  const ps::ComputeModel compute(p, c, pc::DType::kBF16);
  pc::ModuleSpec tiny;
  tiny.kernels = pc::rms_norm_costs(64, 2).kernels;  // 8 kernels of a few bytes each
  const ps::TimeNs ns = compute.module_forward_ns(tiny, 1, 1);
  EXPECT_GE(ns, 7 * 20'000);  // the 8th kernel cannot start before the 8th launch
  EXPECT_LT(ns, 7 * 20'000 + 10'000);
  EXPECT_EQ(ps::ComputeModel::forward_kernel_count(tiny), 8);
  // Work already queued on the stream hides the issue time: with 100 us of backlog, the 8
  // kernels were all issued before the stream reaches them.
  const auto durations = compute.module_forward_kernel_ns(tiny, 1, 1);
  EXPECT_EQ(compute.stream_ns(durations, 20'000, 0), ns);
  EXPECT_LT(compute.stream_ns(durations, 20'000, 140'000), 7 * 1'000 + 8 * 1'000);
  EXPECT_GT(compute.stream_ns(durations, 20'000, 70'000), compute.stream_ns(durations, 20'000, 140'000));
  // With a free host, the kernels run back to back, a gap apart.
  c.forward_op_host_ns = 0;
  const ps::ComputeModel free_host(p, c, pc::DType::kBF16);
  EXPECT_GE(free_host.module_forward_ns(tiny, 1, 1), 7 * 1'000);
  EXPECT_LT(free_host.module_forward_ns(tiny, 1, 1), ns);
  // Backward kernels are issued at the backward cost.
  c.backward_op_host_ns = 50'000;
  const ps::ComputeModel slow_backward(p, c, pc::DType::kBF16);
  EXPECT_GE(slow_backward.module_backward_ns(tiny, 1, 1),
            (ps::ComputeModel::backward_kernel_count(tiny) - 1) * 50'000);
}

TEST(Scenario, AttentionKeyIsReadAndCheckedAgainstDtypeAndModel) {
  TempDir dir("attention");
  auto write = [&](const std::string& name, const std::string& training, const std::string& model_name) {
    const fs::path file = dir.path() / name;
    std::ofstream(file) << "model: " << model_name << "\ntraining: {micro_batch: 1, seq_len: 128" << training
                        << "}\ncluster: {hardware: h100-sxm-8x, nodes: 1, gpus_per_node: 2}\n";
    return file;
  };
  const pc::BundledData bundled = pc::BundledData::from_root(kSourceDir);
  const pc::Scenario eager = pc::load_scenario(write("e.yaml", ", attention: eager", "gpt2-small"), {}, bundled);
  EXPECT_EQ(eager.training.attention, pc::AttentionImpl::kEager);
  EXPECT_TRUE(has_module(eager.model, "transformer.h.0.attn.attn_dropout"));
  const pc::Scenario plain = pc::load_scenario(write("d.yaml", "", "gpt2-small"), {}, bundled);
  EXPECT_EQ(plain.training.attention, pc::AttentionImpl::kSdpa);
  expect_key_error([&] { pc::load_scenario(write("x.yaml", ", attention: xformers", "gpt2-small"), {}, bundled); }, "x.yaml");
  expect_key_error([&] { pc::load_scenario(write("f.yaml", ", attention: flash, dtype: fp32", "gpt2-small"), {}, bundled); }, "f.yaml");
  expect_key_error([&] { pc::load_scenario(write("b.yaml", ", attention: flash", "bert-base"), {}, bundled); }, "b.yaml");
}

TEST(Calibration, UncalibratedNamesTheEstimatesAndForgetsWhatIsSet) {
  const pc::CalibrationConstants a100 = pc::default_calibration("NVIDIA A100 SXM 80GB");
  EXPECT_EQ(std::count(a100.uncalibrated.begin(), a100.uncalibrated.end(), "gemm_efficiency"), 0);
  EXPECT_EQ(std::count(a100.uncalibrated.begin(), a100.uncalibrated.end(), "kernel_launch_us"), 1);
  const pc::CalibrationConstants unknown = pc::default_calibration("Some GPU");
  EXPECT_EQ(std::count(unknown.uncalibrated.begin(), unknown.uncalibrated.end(), "gemm_efficiency"), 1);
  // Sustained clocks are measured for Hopper and Blackwell only.
  EXPECT_EQ(std::count(a100.uncalibrated.begin(), a100.uncalibrated.end(), "sustained_clock_fraction"), 1);
  const pc::CalibrationConstants h100 = pc::default_calibration("NVIDIA H100 SXM 80GB");
  EXPECT_EQ(std::count(h100.uncalibrated.begin(), h100.uncalibrated.end(), "sustained_clock_fraction"), 0);
  EXPECT_EQ(std::count(unknown.uncalibrated.begin(), unknown.uncalibrated.end(), "attention_efficiency"), 1);
  const pc::YamlSection section =
      prefetchlab::testing::parse_yaml("{kernel_launch_us: 7, gemm_efficiency: 0.7}");
  const pc::CalibrationConstants set = pc::read_calibration(section, unknown);
  EXPECT_EQ(std::count(set.uncalibrated.begin(), set.uncalibrated.end(), "kernel_launch_us"), 0);
  EXPECT_EQ(std::count(set.uncalibrated.begin(), set.uncalibrated.end(), "gemm_efficiency"), 0);
  EXPECT_EQ(std::count(set.uncalibrated.begin(), set.uncalibrated.end(), "attention_efficiency"), 1);
}

TEST(DescribeCosts, PrintsOneLayersKernelsAndTotals) {
  const auto r = run_cli("describe llama-2-7b --costs --hardware h100-sxm-8x --seq-len 4096");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sdpa.flash"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rms_norm.pow"), std::string::npos);
  EXPECT_NE(r.output.find("layer forward"), std::string::npos);
  EXPECT_NE(r.output.find("MFU"), std::string::npos);
  // Each GEMM's rate and output tiles: GPT-2-XL's output projection at 4 x 1024 tokens is 224
  // tiles of 128 x 256 in 2 waves of 132 (76% of what it pays for is used), at 519 TFLOPS.
  const auto xl = run_cli("describe gpt2-xl --costs --hardware h200-sxm-8x --micro-batch 4 --seq-len 1024");
  ASSERT_EQ(xl.exit_code, 0) << xl.output;
  EXPECT_NE(xl.output.find("fwd TFLOPS  GEMM output tiles"), std::string::npos) << xl.output;
  const auto proj = xl.output.find("transformer.h.0.attn.c_proj ");
  ASSERT_NE(proj, std::string::npos) << xl.output;
  const std::string proj_line = xl.output.substr(proj, xl.output.find('\n', proj) - proj);
  EXPECT_NE(proj_line.find("224 in 2 waves, 76%"), std::string::npos) << proj_line;
  const auto missing = run_cli("describe llama-2-7b --costs");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--hardware"), std::string::npos) << missing.output;
  const auto bad = run_cli("describe llama-2-7b --costs --hardware no-such-gpu");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST(H200Layers, LargeLayersMatchTheMeasuredTimings) {
  const fs::path file = kSourceDir / "../shared/fidelity/h200-layer-measurements.md";
  PREFETCHLAB_REQUIRE_SHARED(file);
  // Rows: | llama2-7b-layer sdpa ... | B × S | hidden | fwd (ms) | fwd + bwd (ms) | ...
  std::ifstream in(file);
  const std::regex row(R"(^\| (llama2-7b-layer[^|]*)\| (\d+) × (\d+) \| \d+ \| ([0-9.]+) \| ([0-9.]+) \|)");
  const auto p = profile("h200-sxm-8x");
  const ps::ComputeModel compute(p, with_cudnn_attention(p.calibration), pc::DType::kBF16);
  const pc::ModelSpec llama = model("llama-2-7b", pc::AttentionImpl::kSdpa);
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    const std::int64_t b = std::stoll(m[2]);
    const std::int64_t s = std::stoll(m[3]);
    const double fwd_ms = std::stod(m[4]);
    const double total_ms = std::stod(m[5]);
    // The measured layer has no rotary embedding: leave those kernels out.
    pc::ModelSpec no_rotary = llama;
    for (auto& module : no_rotary.modules) {
      std::erase_if(module.kernels, [](const pc::KernelSpec& k) { return k.op.starts_with("rotary."); });
    }
    const auto [sim_fwd_ms, sim_total_ms] = layer_steady_ms(compute, no_rotary, "model.layers.0", b, s);
    std::printf("%s: forward %.3f ms simulated vs %.3f measured, forward + backward %.3f vs %.3f\n",
                m[1].str().c_str(), sim_fwd_ms, fwd_ms, sim_total_ms, total_ms);
    // Forward within 5%, forward + backward within 10% (the backward GEMMs' rate ratio is
    // fitted to the first row).
    EXPECT_NEAR(sim_fwd_ms, fwd_ms, 0.05 * fwd_ms) << line;
    EXPECT_NEAR(sim_total_ms, total_ms, 0.10 * total_ms) << line;
  }
  EXPECT_EQ(rows, 2) << "the file's llama2-7b rows were not found";
}

// GPT-2-small and BERT-base layers are host-bound in eager PyTorch: the GPU idles between
// kernels while the host issues the next, at the per-kernel host costs.
TEST(H200Layers, SmallLayersAreAsSlowAsTheHostThatIssuesThem) {
  const fs::path file = kSourceDir / "../shared/fidelity/h200-layer-measurements.md";
  PREFETCHLAB_REQUIRE_SHARED(file);
  std::ifstream in(file);
  const std::regex row(
      R"(^\| ((gpt2-small|bert-base)-layer (sdpa|eager)[^|]*)\| (\d+) × (\d+) \| \d+ \| ([0-9.]+) \| ([0-9.]+) \|)");
  const auto p = profile("h200-sxm-8x");
  const ps::ComputeModel compute(p, with_cudnn_attention(p.calibration), pc::DType::kBF16);
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    const bool gpt2 = m[2] == "gpt2-small";
    const pc::AttentionImpl attention = m[3] == "sdpa" ? pc::AttentionImpl::kSdpa : pc::AttentionImpl::kEager;
    const pc::ModelSpec spec = gpt2 ? one_kernel_gelu_model("gpt2-small", attention) : model("bert-base", attention);
    const std::string layer = gpt2 ? "transformer.h.0" : "encoder.layer.0";
    const std::int64_t b = std::stoll(m[4]);
    const std::int64_t s = std::stoll(m[5]);
    const auto [sim_fwd_ms, sim_total_ms] = layer_steady_ms(compute, spec, layer, b, s);
    const double fwd_ms = std::stod(m[6]);
    const double total_ms = std::stod(m[7]);
    std::printf("%s: forward %.3f ms simulated vs %.3f measured, forward + backward %.3f vs %.3f\n", m[1].str().c_str(),
                sim_fwd_ms, fwd_ms, sim_total_ms, total_ms);
    EXPECT_NEAR(sim_fwd_ms, fwd_ms, 0.15 * fwd_ms) << line;
    EXPECT_NEAR(sim_total_ms, total_ms, 0.20 * total_ms) << line;
  }
  EXPECT_EQ(rows, 4) << "the file's GPT-2-small and BERT-base rows were not found";
}

// A GPT-2-XL layer's GEMM outputs (N = 4800, 1600, 6400 at M = 4 x 1024 tokens) fill their last
// wave of tiles poorly: its measured forward GEMMs run at 582 TFLOPS against a Llama-2-7B
// layer's 743. They must be within 10% (the tile and wave estimate: sim/cost/compute_model.hpp;
// without it they were 20% fast). The whole layer is printed, not checked: its forward is a
// known gap (docs/fidelity.md), open until bench/layers/torch_layer_timings.py has run on a GPU.
TEST(H200Layers, Gpt2XlLayerGemmsPayForTheirPartialWaves) {
  const fs::path file = kSourceDir / "../shared/fidelity/h200-layer-measurements.md";
  PREFETCHLAB_REQUIRE_SHARED(file);
  std::ifstream in(file);
  const std::regex row(R"(^\| gpt2-xl-layer sdpa[^|]*\| (\d+) × (\d+) \| \d+ \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|)");
  const auto p = profile("h200-sxm-8x");
  const ps::ComputeModel compute(p, with_cudnn_attention(p.calibration), pc::DType::kBF16);
  const pc::ModelSpec spec = one_kernel_gelu_model("gpt2-xl", pc::AttentionImpl::kSdpa);
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    const std::int64_t b = std::stoll(m[1]);
    const std::int64_t s = std::stoll(m[2]);
    const double fwd_ms = std::stod(m[3]);
    const double total_ms = std::stod(m[4]);
    const double gemms_ms = std::stod(m[5]);
    const auto [sim_fwd_ms, sim_total_ms] = layer_steady_ms(compute, spec, "transformer.h.0", b, s);
    // The layer's forward GEMMs alone, back to back.
    std::vector<ps::TimeNs> gemms;
    for (const auto& module : spec.modules) {
      if (!module.name.starts_with("transformer.h.0.")) continue;
      for (const auto& kernel : module.kernels) {
        if (kernel.kind == pc::KernelKind::kGemm) gemms.push_back(compute.kernel_forward_ns(kernel, b, s));
      }
    }
    ASSERT_EQ(gemms.size(), 4u) << "qkv, output projection, MLP up and down";
    const double sim_gemms_ms = static_cast<double>(steady_ns(compute, gemms, compute.host().forward_op_host_ns())) / 1e6;
    std::printf("gpt2-xl-layer: forward GEMMs %.3f ms simulated vs %.3f measured, forward %.3f vs %.3f, "
                "forward + backward %.3f vs %.3f\n",
                sim_gemms_ms, gemms_ms, sim_fwd_ms, fwd_ms, sim_total_ms, total_ms);
    EXPECT_NEAR(sim_gemms_ms, gemms_ms, 0.10 * gemms_ms) << line;
  }
  EXPECT_EQ(rows, 1) << "the file's GPT-2-XL row was not found";
}
