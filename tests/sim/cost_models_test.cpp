// The first cost models: the ring collective model against NCCL's tuner constants
// (NVIDIA/nccl src/graph/tuning.cc) and published nccl-tests busBW, the compute roofline (vendor
// datasheets, stas00/ml-engineering MAMF), and the
// calibration constants that tune both, read strictly from a profile's `calibration:` section
// and a scenario's `cluster.calibration:` override.
#include <gtest/gtest.h>

#include "tests/support/input_error_testing.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"
#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "core/model/model_config.hpp"
#include "core/model/module_costs.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/cost/collective_cost_model.hpp"
#include "sim/cost/compute_model.hpp"
#include "sim/cost/ring_cost_model.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
namespace fs = std::filesystem;
using prefetchlab::testing::TempDir;

namespace {

// The fraction of MAMF a model's own GEMMs reach before their shape's volume and quantization
// (core/hardware/calibration.cpp).
constexpr double kModelGemmsOfMamf = 0.966;
// What a Hopper board sustains under training load of its burst GEMM rate (one H200, same tool:
// core/hardware/calibration.hpp, sustained_clock_fraction).
constexpr double kHopperSustained = 708.5 / 841.9;

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);
const pc::BundledData kBundled = pc::BundledData::from_root(kSourceDir);
constexpr double kGB = 1e9;
constexpr double kUs = 1e3;  // ns per us

pc::HardwareProfile profile(const std::string& name) {
  return pc::load_hardware_profile(kSourceDir / "hardware" / (name + ".yaml"));
}

ps::RingCostModel ring(const std::string& name, const pc::CalibrationConstants& calibration) {
  return ps::RingCostModel(profile(name), calibration);
}
ps::RingCostModel ring(const std::string& name) {
  const auto p = profile(name);
  return ps::RingCostModel(p, p.calibration);
}

ps::CollectiveShape all_gather(std::int64_t bytes, int ranks, int nodes = 1) {
  return {ps::CollectiveKind::kAllGather, bytes, ranks, nodes};
}

double as_double(ps::TimeNs ns) { return static_cast<double>(ns); }


// A profile with a `calibration:` section; line numbers are used by the error cases below.
const std::string kProfileHead =
    "name: test-box\n"                     // 1
    "gpu:\n"                               // 2
    "  model: NVIDIA H100 SXM 80GB\n"      // 3
    "  memory: 80GiB\n"                    // 4
    "  bf16_dense_tflops: 989\n"           // 5
    "  memory_bandwidth_gb_per_s: 3350\n"  // 6
    "  sm_count: 132\n"                    // 7
    "gpus_per_node: 8\n"                   // 8
    "intra_node_link:\n"                   // 9
    "  kind: nvlink\n"                     // 10
    "  nvlink_generation: 4\n"             // 11
    "  links_per_gpu: 18\n"                // 12
    "  per_link_gb_per_s: 25\n"            // 13
    "  nvswitch: true\n"                   // 14
    "host_link:\n"                         // 15
    "  pcie_generation: 5\n"               // 16
    "  pcie_lanes: 16\n";                  // 17
// Calibration lines start at 18 ("calibration:") and 19 (first key).

struct BadCalibration {
  std::string lines;  // the section's body, first line is file line 19
  int line;
  std::string key;
};

pc::InputError profile_error(const BadCalibration& bad) {
  TempDir dir("calibration");
  const fs::path file = dir.write("box.yaml", kProfileHead + "calibration:\n" + bad.lines);
  auto e = expect_input_error([&] { pc::load_hardware_profile(file); });
  EXPECT_EQ(e.where().file, file.string()) << e.what();
  EXPECT_EQ(e.where().line, bad.line) << e.what();
  EXPECT_EQ(e.key(), bad.key) << e.what();
  return e;
}

// A scenario whose cluster section ends with `calibration:` on line 6.
const std::string kScenarioHead =
    "model: tiny-llama\n"                         // 1
    "training: {micro_batch: 1, seq_len: 128}\n"  // 2
    "cluster:\n"                                  // 3
    "  hardware: h100-sxm-8x\n"                   // 4
    "  gpus_per_node: 2\n"                        // 5
    "  calibration:\n";                           // 6

pc::InputError scenario_error(const BadCalibration& bad,
                              const std::vector<std::string>& overrides = {}) {
  TempDir dir("calibration-scenario");
  const fs::path file = dir.write("s.yaml", kScenarioHead + bad.lines);
  auto e = expect_input_error([&] { pc::load_scenario(file, overrides, kBundled); });
  if (overrides.empty()) {
    EXPECT_EQ(e.where().file, file.string()) << e.what();
  }
  EXPECT_EQ(e.where().line, bad.line) << e.what();
  EXPECT_EQ(e.key(), bad.key) << e.what();
  return e;
}

}  // namespace

// --- Collective cost model -------------------------------------------------------------------

TEST(CollectiveCostModel, KindNamesFollowNcclTests) {
  EXPECT_STREQ(ps::collective_kind_name(ps::CollectiveKind::kAllGather), "all_gather");
  EXPECT_STREQ(ps::collective_kind_name(ps::CollectiveKind::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(ps::collective_kind_name(ps::CollectiveKind::kAllReduce), "all_reduce");
}

TEST(RingCostModel, ResearchWorkedExampleLlamaLayerOnEightH100) {
  // One Llama-2-7B layer in bf16, 404,766,720 B, all-gathered on 8x H100 at
  // 360 GB/s: 32.2 us + 7/8 * 404.8e6 / 360e9 = ~1.02 ms.
  const auto model = ring("h100-sxm-8x");
  const std::int64_t layer_bytes = 404'766'720;
  const ps::TimeNs t = model.duration_ns(all_gather(layer_bytes, 8));
  EXPECT_NEAR(as_double(t), 1.02e6, 0.01e6);
  EXPECT_EQ(t, 32'200 + std::llround(7.0 / 8.0 * layer_bytes / 360e9 * 1e9));
  // Reduce-scatter has the same ring cost; all-reduce moves twice the data over twice the steps.
  EXPECT_EQ(model.duration_ns({ps::CollectiveKind::kReduceScatter, layer_bytes, 8, 1}), t);
  EXPECT_EQ(model.duration_ns({ps::CollectiveKind::kAllReduce, layer_bytes, 8, 1}),
            8'400 + 14 * 3'400 + std::llround(2 * 7.0 / 8.0 * layer_bytes / 360e9 * 1e9));
}

TEST(RingCostModel, DerivedBusBandwidthMatchesMeasurements) {
  // NVLink: 0.8 x links x per-link (measured ring busBW, stas00/ml-engineering network/README.md).
  EXPECT_NEAR(ring("h100-sxm-8x").intra_node_bus_bandwidth_bytes_per_s(), 360 * kGB, 0.5 * kGB);
  EXPECT_NEAR(ring("h200-sxm-8x").intra_node_bus_bandwidth_bytes_per_s(), 361.4 * kGB,
              0.01 * 361.4 * kGB);  // stas00 all_gather
  EXPECT_NEAR(ring("a100-sxm-8x").intra_node_bus_bandwidth_bytes_per_s(), 240 * kGB, 0.5 * kGB);
  EXPECT_NEAR(ring("a100-sxm-8x").intra_node_bus_bandwidth_bytes_per_s(), 235 * kGB,
              0.03 * 235 * kGB);  // measured all_reduce
  EXPECT_NEAR(ring("b200-sxm-8x").intra_node_bus_bandwidth_bytes_per_s(), 682 * kGB,
              0.06 * 682 * kGB);  // measured all_reduce ring
  // PCIe Gen4 x16 with P2P: 0.8 x 31.5 = 25.2 GB/s (P2P copies 26.3, nvbandwidth #50).
  const double gen4 = 16e9 * 128.0 / 130.0 / 8.0 * 16;
  EXPECT_NEAR(ring("rtx4000ada-2x-pcie4").intra_node_bus_bandwidth_bytes_per_s(), 0.8 * gen4, 1);
  EXPECT_NEAR(ring("l40s-8x-pcie4").intra_node_bus_bandwidth_bytes_per_s(), 0.8 * gen4, 1);
  // Without P2P, through host memory: below P2P, inside the 11-16 GB/s measured each way under
  // bidirectional copies on 8x RTX 4090 (nvbandwidth #15).
  const double shm = ring("rtx4090-8x-pcie4-nop2p").intra_node_bus_bandwidth_bytes_per_s();
  EXPECT_NEAR(shm, 0.4 * gen4, 1);
  EXPECT_GE(shm, 11 * kGB);
  EXPECT_LE(shm, 16 * kGB);
}

TEST(RingCostModel, LatencyTableNvlinkAndPciSimple) {
  // Derived from NCCL's tuner constants (NVIDIA/nccl src/graph/tuning.cc): ring AG/RS Simple,
  // 2/4/8 ranks.
  const auto nvlink = ring("h100-sxm-8x");
  const auto pci = ring("l40s-8x-pcie4");
  const std::vector<std::pair<int, std::pair<ps::TimeNs, ps::TimeNs>>> table{
      {2, {11'800, 14'100}}, {4, {18'600, 25'500}}, {8, {32'200, 48'300}}};
  for (const auto& [ranks, expected] : table) {
    SCOPED_TRACE(ranks);
    EXPECT_EQ(nvlink.latency_ns(all_gather(1 << 20, ranks)), expected.first);
    EXPECT_EQ(pci.latency_ns(all_gather(1 << 20, ranks)), expected.second);
    EXPECT_EQ(pci.latency_ns({ps::CollectiveKind::kReduceScatter, 1 << 20, ranks, 1}),
              expected.second);
  }
  // PCIe without P2P uses the PCI hop class too (the SHM path's extra cost is a later step).
  EXPECT_EQ(ring("rtx4090-8x-pcie4-nop2p").latency_ns(all_gather(8, 8)), 48'300);
  // A zero-byte all-gather still pays the latency.
  EXPECT_EQ(nvlink.duration_ns(all_gather(0, 8)), 32'200);
}

TEST(RingCostModel, OneRankCostsNothing) {
  const auto model = ring("h100-sxm-8x");
  EXPECT_EQ(model.duration_ns(all_gather(1'000'000'000, 1)), 0);
  EXPECT_EQ(model.duration_ns({ps::CollectiveKind::kAllReduce, 1'000'000'000, 1, 1}), 0);
  EXPECT_EQ(model.latency_ns(all_gather(8, 1)), 0);
}

TEST(RingCostModel, DurationGrowsWithBytesAndRanks) {
  const auto model = ring("h100-sxm-8x");
  EXPECT_LT(model.duration_ns(all_gather(1 << 20, 8)), model.duration_ns(all_gather(1 << 24, 8)));
  EXPECT_LT(model.duration_ns(all_gather(1 << 24, 2)), model.duration_ns(all_gather(1 << 24, 8)));
}

TEST(RingCostModel, MultiNodeUsesNetworkTierForLatencyAndBandwidth) {
  const auto model = ring("h100-sxm-cluster");
  // 2 nodes x 8: 15 steps, 1 of them across the network:
  // 8.4 + 14 * max(3.4, 3.0) + 1 * 14.0 = 70.0 us.
  EXPECT_EQ(model.latency_ns(all_gather(1 << 20, 16, 2)), 70'000);
  // 8 NICs of 400 Gb at 0.97 = 388 GB/s per node: NVLink's 360 stays the bound.
  EXPECT_DOUBLE_EQ(model.derived_bus_bandwidth_bytes_per_s(16, 2), 360 * kGB);
  // One GPU per node: a single NIC share, 50 GB/s x 0.97 (48-49 achieved, nccl-tests #267).
  EXPECT_DOUBLE_EQ(model.derived_bus_bandwidth_bytes_per_s(2, 2), 48.5 * kGB);
  EXPECT_EQ(model.latency_ns(all_gather(1 << 20, 2, 2)), 8'400 + 14'000);
  // All-reduce across nodes: 2(n-1) = 30 steps, 2 across the network, and the x1.4 plateau
  // factor once the message is not tiny.
  const ps::TimeNs ar = 8'400 + 28 * 3'400 + 2 * 14'000;
  EXPECT_EQ(model.latency_ns({ps::CollectiveKind::kAllReduce, 8, 16, 2}), ar);
  EXPECT_EQ(model.latency_ns({ps::CollectiveKind::kAllReduce, 1 << 20, 16, 2}),
            std::llround(ar * 1.4));
  // DGX A100 with 8x 200 Gb: 194 GB/s, against 192 measured across nodes (nccl #812).
  pc::HardwareProfile a100 = profile("a100-sxm-8x");
  a100.max_nodes = 4;
  const ps::RingCostModel a100_model(a100, a100.calibration);
  EXPECT_NEAR(a100_model.derived_bus_bandwidth_bytes_per_s(16, 2), 192 * kGB, 0.02 * 192 * kGB);
}

TEST(RingCostModel, CalibrationOverridesWin) {
  pc::CalibrationConstants c = profile("h100-sxm-8x").calibration;
  c.collective_latency_ns = 10'000;
  c.allgather_bus_bandwidth_bytes_per_s = 100 * kGB;
  c.reduce_scatter_bus_bandwidth_bytes_per_s = 50 * kGB;
  const auto model = ring("h100-sxm-8x", c);
  const std::int64_t s = 800'000'000;
  EXPECT_EQ(model.duration_ns(all_gather(s, 8)), 10'000 + 7'000'000);  // 7/8 * 0.8 GB / 100 GB/s
  EXPECT_EQ(model.duration_ns({ps::CollectiveKind::kReduceScatter, s, 8, 1}), 10'000 + 14'000'000);
  // All-reduce = reduce-scatter phase + all-gather phase, one latency.
  EXPECT_EQ(model.duration_ns({ps::CollectiveKind::kAllReduce, s, 8, 1}), 10'000 + 21'000'000);
  // The derived figures are still there underneath.
  EXPECT_EQ(model.derived_latency_ns(all_gather(s, 8)), 32'200);
  EXPECT_DOUBLE_EQ(model.derived_bus_bandwidth_bytes_per_s(8, 1), 360 * kGB);
  // Overrides also hold across nodes: they are measurements of the cluster as used.
  const auto cluster = ring("h100-sxm-cluster", c);
  EXPECT_EQ(cluster.duration_ns(all_gather(s, 16, 2)),
            10'000 + std::llround(15.0 / 16 * 8e-3 * 1e9));
}

TEST(RingCostModel, ZeroLatencyAndHugeBandwidthCostNothing) {
  pc::CalibrationConstants c;
  c.collective_latency_ns = 0;
  c.allgather_bus_bandwidth_bytes_per_s = 1e24;
  c.reduce_scatter_bus_bandwidth_bytes_per_s = 1e24;
  const auto model = ps::make_collective_cost_model(profile("h100-sxm-8x"), c);
  for (const auto kind : {ps::CollectiveKind::kAllGather, ps::CollectiveKind::kReduceScatter,
                          ps::CollectiveKind::kAllReduce}) {
    EXPECT_EQ(model->duration_ns({kind, 100'000'000'000, 8, 1}), 0);
  }
}

TEST(RingCostModel, FactoryGivesTheRingModelWhenCalibrationAsks) {
  auto p = profile("a100-sxm-8x");
  p.calibration.collective_model = pc::CalibrationConstants::CollectiveModel::kRing;
  const auto model = ps::make_collective_cost_model(p, p.calibration);
  const ps::RingCostModel direct(p, p.calibration);
  for (const std::int64_t bytes : {std::int64_t{0}, std::int64_t{1} << 10, std::int64_t{1} << 30}) {
    EXPECT_EQ(model->duration_ns(all_gather(bytes, 8)), direct.duration_ns(all_gather(bytes, 8)));
  }
}

TEST(RingCostModel, ImpossibleShapesThrow) {
  const auto model = ring("h100-sxm-8x");
  EXPECT_THROW(model.duration_ns(all_gather(-1, 8)), std::invalid_argument);
  EXPECT_THROW(model.duration_ns(all_gather(8, 0)), std::invalid_argument);
  EXPECT_THROW(model.duration_ns(all_gather(8, 8, 0)), std::invalid_argument);
  EXPECT_THROW(model.duration_ns(all_gather(8, 16, 1)),
               std::invalid_argument);                                          // 16 on a node of 8
  EXPECT_THROW(model.duration_ns(all_gather(8, 9, 2)), std::invalid_argument);  // uneven
  // h100-sxm-8x has a network section, l40s has none.
  EXPECT_THROW(ring("l40s-8x-pcie4").duration_ns(all_gather(8, 16, 2)), std::invalid_argument);
}

// --- Compute model ---------------------------------------------------------------------------

TEST(ComputeModel, KernelTakesTheLongerOfFlopsAndBytes) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  // MAMF (stas00/ml-engineering compute/accelerator/README.md) at the fraction a model's GEMMs
  // reach on an H200 (core/hardware/calibration.cpp, default_gemm_efficiency), at sustained clocks.
  const double flops_per_s = 989e12 * 0.803 * kModelGemmsOfMamf * kHopperSustained;
  const double bytes_per_s = 3350e9 * 0.87;
  EXPECT_DOUBLE_EQ(m.effective_flops_per_s(), flops_per_s);
  EXPECT_DOUBLE_EQ(m.effective_memory_bytes_per_s(), bytes_per_s);
  const double flops = 1e12;
  const double bytes = 1e9;
  const auto flop_ns = std::llround(flops / flops_per_s * 1e9);
  const auto byte_ns = std::llround(bytes / bytes_per_s * 1e9);
  EXPECT_EQ(m.kernel_ns(flops, 0), flop_ns);
  EXPECT_EQ(m.kernel_ns(0, bytes), byte_ns);
  EXPECT_EQ(m.kernel_ns(flops, bytes), std::max(flop_ns, byte_ns));
  EXPECT_EQ(m.kernel_ns(flops / 1000, bytes), byte_ns);  // memory-bound
  EXPECT_EQ(m.kernel_ns(0, 0), 0);
  EXPECT_THROW(m.kernel_ns(-1, 0), std::invalid_argument);
}

TEST(ComputeModel, ComputeTimeScaleStretchesOrRemovesKernels) {
  const auto p = profile("h100-sxm-8x");
  pc::CalibrationConstants c = p.calibration;
  const ps::ComputeModel base(p, c, pc::DType::kBF16);
  c.compute_time_scale = 2;
  const ps::ComputeModel slow(p, c, pc::DType::kBF16);
  EXPECT_NEAR(as_double(slow.kernel_ns(1e12, 0)), 2 * as_double(base.kernel_ns(1e12, 0)), 1);
  c.compute_time_scale = 0;
  const ps::ComputeModel free_compute(p, c, pc::DType::kBF16);
  EXPECT_EQ(free_compute.kernel_ns(1e15, 1e12), 0);
  EXPECT_EQ(free_compute.copy_ns(1'000'000'000), 0);
  EXPECT_EQ(free_compute.optimizer_step_ns(1'000'000'000), 0);
  const pc::ModelSpec llama =
      pc::load_model_file(kSourceDir / "models/llama-2-7b.yaml", pc::DType::kBF16);
  for (const auto& module : llama.modules) {
    EXPECT_EQ(free_compute.module_forward_ns(module, 1, 4096), 0);
    EXPECT_EQ(free_compute.module_backward_ns(module, 1, 4096), 0);
  }
  // Host costs are not compute: they stay.
  EXPECT_EQ(free_compute.host().pre_forward_hook_ns(), base.host().pre_forward_hook_ns());
  EXPECT_EQ(free_compute.host().kernel_launch_ns(), base.host().kernel_launch_ns());
}

TEST(ComputeModel, BackwardIsTwiceForwardForLinearsAndMoreForAttention) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  const pc::ModelSpec llama =
      pc::load_model_file(kSourceDir / "models/llama-2-7b.yaml", pc::DType::kBF16);
  int linears = 0;
  for (const auto& module : llama.modules) {
    const ps::TimeNs fwd = m.module_forward_ns(module, 1, 4096);
    const ps::TimeNs bwd = m.module_backward_ns(module, 1, 4096);
    if (module.class_name == "Linear") {
      ++linears;
      EXPECT_GT(fwd, 0) << module.name;
      // dgrad + wgrad, each the forward's GEMM at the backward's rate ratio, one launch gap apart.
      EXPECT_NEAR(as_double(bwd), 2 * as_double(fwd) / p.calibration.gemm_backward_rate_ratio +
                                      as_double(p.calibration.kernel_gap_ns), 4) << module.name;
    }
  }
  EXPECT_EQ(linears, 32 * 7 + 1);
  // The sdpa kernel: a flash backward is 2.5x its forward's FLOPs, at the backward's efficiency.
  const auto& attention =
      *std::find_if(llama.modules.begin(), llama.modules.end(),
                    [](const auto& x) { return x.name == "model.layers.0.self_attn"; });
  const auto& flash = *std::find_if(attention.kernels.begin(), attention.kernels.end(),
                                    [](const auto& k) { return k.op == "sdpa.flash"; });
  const double ratio = static_cast<double>(m.kernel_backward_ns(flash, 1, 4096)) /
                       static_cast<double>(m.kernel_forward_ns(flash, 1, 4096));
  const double expected = 2.5 * (p.calibration.attention_efficiency * ps::ComputeModel::attention_seq_fraction(4096, false)) /
                          (p.calibration.attention_backward_efficiency * ps::ComputeModel::attention_seq_fraction(4096, true));
  EXPECT_NEAR(ratio, expected, 1e-3);
}

TEST(ComputeModel, LlamaLayerForwardOnH100NearResearchFigure) {
  // A Llama-2-7B layer at b=1, s=4096 is 1.658 TFLOP of linears + 0.275 TFLOP of
  // (non-causal) attention = 1.93 TFLOP -> ~2.4 ms at 800 TFLOPS. Here attention is causal
  // (half), GEMMs run at 989 x 0.803 = 794 TFLOPS x 0.966 x the sustained-clock 0.842, and the layer's memory-bound kernels (norms,
  // residual adds, SiLU, the SwiGLU product) add their own time.
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  const pc::ModelSpec llama =
      pc::load_model_file(kSourceDir / "models/llama-2-7b.yaml", pc::DType::kBF16);
  // GEMMs of M = 4096 tokens by 4096 x 4096 (q, k, v, o) and 4096 x 11008 (gate, up, down)
  // reach 99.1% and 99.8% of the MAMF plateau by volume (gemm_shape_fraction), and 97.0% and
  // 94.7% of it by their tiles (gemm_wave_fraction: 4 waves of 512 tiles of 128 x 256, 11 of
  // 1,376 on 132 SMs; down's output is 4096 wide).
  ps::TimeNs layer_ns = 0;
  ps::TimeNs linear_ns = 0;
  double expected_linear_ns = 0;
  for (const auto& module : llama.modules) {
    if (module.name != "model.layers.0" && !module.name.starts_with("model.layers.0.")) continue;
    // The layer's large kernels keep the stream busy while the host issues the next ones: the
    // device's own time, as a host with queued work ahead of it sees it.
    const auto kernels = m.module_forward_kernel_ns(module, 1, 4096);
    const ps::TimeNs t = m.stream_ns(kernels, m.host().forward_op_host_ns(), std::numeric_limits<ps::TimeNs>::max() / 2);
    layer_ns += t;
    if (module.class_name == "Linear") {
      linear_ns += t;
      const double mnk = 4096.0 * static_cast<double>(module.forward_flops.per_token) / 2;
      const double n = static_cast<double>(module.kernels.front().gemm_n);
      const double waves = n == 4096 ? 512.0 / (4 * 132) : 1376.0 / (11 * 132);  // whole tiles: N % 256 == 0
      EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(4096, n), waves) << module.name;
      expected_linear_ns +=
          2 * mnk / (989e12 * 0.803 * kModelGemmsOfMamf * kHopperSustained * m.gemm_shape_fraction(mnk) * waves) * 1e9;
    }
  }
  EXPECT_NEAR(as_double(linear_ns), expected_linear_ns, 1e3);
  // ~2.7 ms: 5.1% over the FLOPs at the plateau (q, k, v, o: 3.8%; gate, up, down: 5.8%).
  EXPECT_NEAR(as_double(linear_ns), 1.658e12 / (989e12 * 0.803 * kModelGemmsOfMamf * kHopperSustained) * 1e9 * 1.05,
              0.01 * 2.3e6 / kHopperSustained);
  // Around the GEMMs: FlashAttention-2 at its H100 rate (~0.43 ms) and eager PyTorch's norms,
  // rotary, SiLU, product and adds (~0.6 ms): together 35-75% on top of the linears (1.65x here).
  EXPECT_GT(as_double(layer_ns), 1.35 * as_double(linear_ns));
  EXPECT_LT(as_double(layer_ns), 1.75 * as_double(linear_ns));
}

// Tile and wave quantization (NVIDIA, "Matrix Multiplication Background User's Guide"): an
// output of more than one wave of 128 x 256 tiles pays for whole waves and padded tiles.
TEST(ComputeModel, GemmWaveFractionCountsWholeWavesOfTiles) {
  auto p = profile("h100-sxm-8x");  // 132 SMs
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  const double tile = 128.0 * 256.0;
  // GPT-2-XL's output projection at 4,096 tokens: 32 x 7 = 224 tiles (the last column padded
  // from 1,600 to 1,792), 2 waves.
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(4096, 1600), 4096.0 * 1600.0 / (2 * 132 * tile));
  // 133 whole tiles: a second wave for one tile.
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(133 * 128, 256), 133.0 / 264.0);
  // One wave or less (132 tiles, 128 tiles) is the volume curve's: nothing more.
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(132 * 128, 256), 1.0);
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(1024, 4096), 1.0);
  // Smaller than a tile (cuBLAS picks another tile there): nothing.
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(100, 65536), 1.0);
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(65536, 64), 1.0);
  // A share of the tokens (an MoE expert's) is a fractional M: its tiles are still whole.
  EXPECT_DOUBLE_EQ(m.gemm_wave_fraction(4096.5, 4096), 4096.5 * 4096 / (4 * 132 * tile));  // 33 x 16 = 528 tiles
  // A Linear kernel carries its N and K; the forward prices its M = tokens.
  const pc::KernelSpec linear = pc::linear_costs(1600, 1600, true, 2).kernels.front();
  EXPECT_EQ(linear.gemm_n, 1600);
  EXPECT_EQ(linear.gemm_k, 1600);
  pc::KernelSpec unknown_shape = linear;
  unknown_shape.gemm_n = unknown_shape.gemm_k = 0;  // as eager attention's batched GEMMs
  const double quantized = static_cast<double>(m.kernel_forward_ns(linear, 4, 1024));
  const double by_volume = static_cast<double>(m.kernel_forward_ns(unknown_shape, 4, 1024));
  EXPECT_NEAR(quantized * m.gemm_wave_fraction(4096, 1600), by_volume, 1.0);
  // fp32 GEMMs run SIMT kernels with other tiles: the volume curve alone.
  EXPECT_DOUBLE_EQ(ps::ComputeModel(p, p.calibration, pc::DType::kFP32).gemm_wave_fraction(4096, 1600), 1.0);
  // Without an SM count there are no waves to count.
  p.gpu.sm_count = 0;
  EXPECT_DOUBLE_EQ(ps::ComputeModel(p, p.calibration, pc::DType::kBF16).gemm_wave_fraction(4096, 1600), 1.0);
}

TEST(ComputeModel, CopyAndOptimizerAreMemoryBound) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  const double bytes_per_s = 3350e9 * 0.87;
  EXPECT_EQ(m.copy_ns(1'000'000'000), std::llround(2e9 / bytes_per_s * 1e9));
  // DeepSpeed stage3.py's step, kernel by kernel (see the header): bf16 skips the overflow
  // check, fp32 the upcast.
  EXPECT_EQ(ps::ComputeModel::optimizer_bytes_per_element(pc::DType::kBF16), 70);
  EXPECT_EQ(ps::ComputeModel::optimizer_bytes_per_element(pc::DType::kFP16), 78);
  EXPECT_EQ(ps::ComputeModel::optimizer_bytes_per_element(pc::DType::kFP32), 72);
  // Llama-2-7B over 8 ranks: 842 M fp32 elements per rank -> ~20 ms of step on one H100.
  const std::int64_t shard = 6'738'415'616 / 8;
  EXPECT_EQ(m.optimizer_step_ns(shard), std::llround(shard * 70.0 / bytes_per_s * 1e9));
  EXPECT_EQ(m.optimizer_step_ns(0), 0);
}

TEST(ComputeModel, MeasuredDeviceAdamRateReplacesTheMemoryBoundStep) {
  const auto p = profile("h100-sxm-8x");
  pc::CalibrationConstants c = p.calibration;
  c.device_adam_elements_per_s = 2e8;  // a host-device calibration's order of magnitude
  c.compute_time_scale = 2;
  const ps::ComputeModel m(p, c, pc::DType::kBF16);
  EXPECT_EQ(m.optimizer_step_ns(1'000'000), 10'000'000);  // 5 ms at 2e8/s, times 2
}

TEST(ComputeModel, HostCostsAreTheCalibrationOverHostSpeed) {
  const auto p = profile("h100-sxm-8x");
  pc::CalibrationConstants c = p.calibration;
  c.kernel_launch_ns = 5'000;
  c.host_pre_forward_hook_ns = 30'000;
  c.host_fetch_call_ns = 10'000;
  c.host_fetch_per_param_ns = 2'000;
  c.host_fetch_per_inflight_param_ns = 30'000;
  c.host_fetch_gather_round_ns = 60'000;
  c.host_allgather_call_ns = 100'000;
  c.host_allgather_per_param_ns = 8'000;
  c.host_release_call_ns = 10'000;
  c.host_release_per_param_ns = 1'000;
  c.host_release_per_freed_param_ns = 60'000;
  c.host_reduce_scatter_call_ns = 115'000;
  c.host_reduce_scatter_per_param_ns = 10'000;
  c.host_optimizer_step_per_param_ns = 16'000;
  c.host_speed = 0.5;  // host code twice as slow as the defaults' GPU server
  const ps::ComputeModel m(p, c, pc::DType::kBF16);
  const ps::HostCostModel& host = m.host();
  EXPECT_EQ(host.kernel_launch_ns(), 10'000);
  EXPECT_EQ(host.pre_forward_hook_ns(), 60'000);
  EXPECT_EQ(host.fetch_bookkeeping_ns(3), 2 * (10'000 + 3 * 2'000));
  EXPECT_EQ(host.fetch_ns(2, 1, 1), 2 * (10'000 + 2 * 2'000 + 30'000 + 60'000));
  EXPECT_EQ(host.all_gather_ns(1), 2 * 108'000);
  EXPECT_EQ(host.all_gather_ns(4), 2 * (100'000 + 4 * 8'000));
  EXPECT_EQ(host.release_ns(2, 1), 2 * (10'000 + 2 * 1'000 + 60'000));
  EXPECT_EQ(host.reduce_scatter_ns(3), 2 * (115'000 + 3 * 10'000));
  EXPECT_EQ(host.optimizer_step_ns(10), 2 * 160'000);
  c.host_speed = std::numeric_limits<double>::infinity();  // a free host
  const ps::ComputeModel free_host(p, c, pc::DType::kBF16);
  EXPECT_EQ(free_host.host().kernel_launch_ns(), 0);
  EXPECT_EQ(free_host.host().fetch_ns(2, 1, 1), 0);
  EXPECT_EQ(free_host.host().release_ns(2, 1), 0);
  EXPECT_GT(free_host.kernel_ns(1e12, 0), 0);  // device time is untouched
  c.host_speed = 0;
  EXPECT_THROW(ps::ComputeModel(p, c, pc::DType::kBF16), std::invalid_argument);
}

// The defaults put DeepSpeed's single-parameter all_gather_coalesced at the public per-call
// figure for a torch-level collective on GPU servers (~115 us: calibration.hpp), and every other
// term at its recorded ratio to that call.
TEST(ComputeModel, DefaultHostCostsAnchorOneGatherCallAt115Us) {
  const pc::CalibrationConstants c;
  EXPECT_DOUBLE_EQ(c.host_speed, 1.0);
  const ps::HostCostModel host(c);
  EXPECT_EQ(host.all_gather_ns(1), 115'000);
  EXPECT_EQ(host.reduce_scatter_ns(0), 115'000);
  // The recording machine's speed makes that call its recorded median, 312 us.
  pc::CalibrationConstants recording = c;
  recording.host_speed = 115.0 / 312.0;
  EXPECT_EQ(ps::HostCostModel(recording).all_gather_ns(1), 312'000);
}

TEST(ComputeModel, Fp32UsesTheFp32RateAndNeedsOne) {
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel fp32(p, p.calibration, pc::DType::kFP32);
  EXPECT_DOUBLE_EQ(fp32.effective_flops_per_s(), 67e12 * 0.803 * kModelGemmsOfMamf * kHopperSustained);
  TempDir dir("compute");
  const fs::path file = dir.write("box.yaml", kProfileHead);  // no fp32_tflops
  const auto no_fp32 = pc::load_hardware_profile(file);
  const auto e =
      expect_input_error([&] { ps::ComputeModel(no_fp32, no_fp32.calibration, pc::DType::kFP32); });
  EXPECT_EQ(e.where().file, file.string());
  EXPECT_EQ(e.key(), "gpu.fp32_tflops");
  EXPECT_NO_THROW(ps::ComputeModel(no_fp32, no_fp32.calibration, pc::DType::kFP16));
}

// --- Calibration constants -------------------------------------------------------------------

TEST(Calibration, DefaultGemmEfficiencyPerGpu) {
  // MAMF fractions (stas00/ml-engineering compute/accelerator/README.md), each at the fraction
  // a model's GEMMs reach on an H200.
  const double r = kModelGemmsOfMamf;
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA H100 SXM 80GB"), 0.803 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA H200 SXM 141GB"), 0.803 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA A100 SXM 80GB"), 0.869 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA A100 PCIe 40GB"), 0.811 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA B200 180GB"), 0.776 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA GH200"), 0.838 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA GB200"), 0.729 * r);
  EXPECT_DOUBLE_EQ(pc::default_gemm_efficiency("NVIDIA L40S"), 0.8);  // not measured
  EXPECT_DOUBLE_EQ(profile("h100-sxm-8x").calibration.gemm_efficiency, 0.803 * r);
  EXPECT_DOUBLE_EQ(profile("a100-sxm-8x").calibration.gemm_efficiency, 0.869 * r);
  EXPECT_DOUBLE_EQ(profile("b200-sxm-8x").calibration.gemm_efficiency, 0.776 * r);
  EXPECT_DOUBLE_EQ(profile("rtx4090-8x-pcie4-nop2p").calibration.gemm_efficiency, 0.8);
  const pc::CalibrationConstants defaults;
  EXPECT_DOUBLE_EQ(defaults.compute_time_scale, 1.0);
  EXPECT_DOUBLE_EQ(defaults.host_speed, 1.0);
  EXPECT_FALSE(defaults.allgather_bus_bandwidth_bytes_per_s);
  EXPECT_FALSE(defaults.reduce_scatter_bus_bandwidth_bytes_per_s);
  EXPECT_FALSE(defaults.collective_latency_ns);
}

TEST(Calibration, ProfileSectionReadsEveryKeyInItsUnit) {
  TempDir dir("calibration");
  const fs::path file = dir.write("box.yaml", kProfileHead +
                                                  "calibration:\n"
                                                  "  gemm_efficiency: 0.7\n"
                                                  "  memory_efficiency: 0.9\n"
                                                  "  compute_time_scale: 0.5\n"
                                                  "  kernel_launch_us: 4.5\n"
                                                  "  host_pre_forward_hook_us: 35\n"
                                                  "  host_allgather_call_us: 12.25\n"
                                                  "  host_optimizer_step_per_param_us: 0\n"
                                                  "  allgather_bus_bandwidth_gb_per_s: 361.4\n"
                                                  "  reduce_scatter_bus_bandwidth_gb_per_s: 362.9\n"
                                                  "  collective_latency_us: 25\n"
                                                  "  host_speed: 2\n"
                                                  "  device_adam_elements_per_s: 1.5e8\n");
  const auto c = pc::load_hardware_profile(file).calibration;
  EXPECT_DOUBLE_EQ(*c.device_adam_elements_per_s, 1.5e8);
  EXPECT_DOUBLE_EQ(c.gemm_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(c.memory_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(c.compute_time_scale, 0.5);
  EXPECT_EQ(c.kernel_launch_ns, 4'500);
  EXPECT_EQ(c.host_pre_forward_hook_ns, 35'000);
  EXPECT_EQ(c.host_allgather_call_ns, 12'250);
  EXPECT_EQ(c.host_optimizer_step_per_param_ns, 0);
  EXPECT_EQ(c.host_post_forward_hook_ns, pc::CalibrationConstants{}.host_post_forward_hook_ns);  // default
  EXPECT_DOUBLE_EQ(*c.allgather_bus_bandwidth_bytes_per_s, 361.4e9);
  EXPECT_DOUBLE_EQ(*c.reduce_scatter_bus_bandwidth_bytes_per_s, 362.9e9);
  EXPECT_EQ(*c.collective_latency_ns, 25'000);
  EXPECT_DOUBLE_EQ(c.host_speed, 2);
  // A profile without the section gets the GPU's defaults.
  const auto plain = pc::load_hardware_profile(dir.write("plain.yaml", kProfileHead)).calibration;
  EXPECT_DOUBLE_EQ(plain.gemm_efficiency, 0.803 * kModelGemmsOfMamf);
  EXPECT_EQ(plain.kernel_launch_ns, pc::CalibrationConstants{}.kernel_launch_ns);
}

TEST(Calibration, ScenarioOverridesProfileKeyByKey) {
  TempDir dir("calibration-merge");
  dir.write("box.yaml", kProfileHead +
                            "calibration:\n"
                            "  gemm_efficiency: 0.7\n"
                            "  collective_latency_us: 20\n"
                            "  allgather_bus_bandwidth_gb_per_s: 300\n");
  const fs::path scenario = dir.write("s.yaml",
                                      "model: tiny-llama\n"
                                      "training: {micro_batch: 1, seq_len: 128}\n"
                                      "cluster:\n"
                                      "  hardware: box.yaml\n"
                                      "  calibration:\n"
                                      "    gemm_efficiency: 0.6\n"
                                      "    allgather_bus_bandwidth_gb_per_s: derived\n"
                                      "    host_release_call_us: 50\n");
  const pc::Scenario s = pc::load_scenario(scenario, {}, kBundled);
  EXPECT_DOUBLE_EQ(s.cluster.calibration.gemm_efficiency, 0.6);             // scenario
  EXPECT_EQ(s.cluster.calibration.collective_latency_ns, 20'000);           // profile
  EXPECT_FALSE(s.cluster.calibration.allgather_bus_bandwidth_bytes_per_s);  // cleared
  EXPECT_EQ(s.cluster.calibration.host_release_call_ns, 50'000);            // scenario
  EXPECT_DOUBLE_EQ(s.cluster.calibration.memory_efficiency, 0.87);          // default
  // The profile keeps its own values.
  EXPECT_DOUBLE_EQ(s.cluster.hardware.calibration.gemm_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(*s.cluster.hardware.calibration.allgather_bus_bandwidth_bytes_per_s, 300e9);
  // Without a calibration section the cluster gets the profile's constants.
  const pc::Scenario plain =
      pc::load_scenario(dir.write("p.yaml",
                                  "model: tiny-llama\ntraining: {micro_batch: 1, seq_len: 128}\n"
                                  "cluster: {hardware: box.yaml}\n"),
                        {}, kBundled);
  EXPECT_DOUBLE_EQ(plain.cluster.calibration.gemm_efficiency, 0.7);
  EXPECT_EQ(plain.cluster.calibration.collective_latency_ns, 20'000);
}

TEST(Calibration, SetOverridesReachClusterCalibration) {
  TempDir dir("calibration-set");
  const fs::path file = dir.write("s.yaml", kScenarioHead + "    gemm_efficiency: 0.5\n");
  const pc::Scenario s = pc::load_scenario(
      file,
      {"cluster.calibration.compute_time_scale=0", "cluster.calibration.gemm_efficiency=0.75"},
      kBundled);
  EXPECT_DOUBLE_EQ(s.cluster.calibration.compute_time_scale, 0);
  EXPECT_DOUBLE_EQ(s.cluster.calibration.gemm_efficiency, 0.75);
  // A bad --set value is reported at the --set, with the key.
  const auto e =
      scenario_error({"    gemm_efficiency: 0.5\n", 0, "cluster.calibration.host_speed"},
                     {"cluster.calibration.host_speed=-1"});
  EXPECT_EQ(e.where().file, "--set cluster.calibration.host_speed");
  // inf is a free host, from a --set as from a file.
  const pc::Scenario free_host = pc::load_scenario(file, {"cluster.calibration.host_speed=inf"}, kBundled);
  EXPECT_TRUE(std::isinf(free_host.cluster.calibration.host_speed));
}

TEST(CalibrationErrors, ProfileSectionUnknownKeySuggestsClosest) {
  const auto e = profile_error(
      {"  gemm_efficiency: 0.8\n  kernel_lanch_us: 5\n", 20, "calibration.kernel_lanch_us"});
  EXPECT_EQ(e.suggestion(), "kernel_launch_us");
  // A unit left off the name is a different key: the suggestion names the right one.
  const auto unit =
      profile_error({"  collective_latency: 5\n", 19, "calibration.collective_latency"});
  EXPECT_EQ(unit.suggestion(), "collective_latency_us");
}

TEST(CalibrationErrors, ProfileSectionValuesOutOfRange) {
  auto e = profile_error({"  gemm_efficiency: 0\n", 19, "calibration.gemm_efficiency"});
  EXPECT_NE(e.expected().find("(0, 1]"), std::string::npos) << e.what();
  profile_error({"  gemm_efficiency: 1.2\n", 19, "calibration.gemm_efficiency"});
  profile_error({"  memory_efficiency: 0.9\n  memory_efficiency: 0.8\n", 20,
                 "calibration.memory_efficiency"});  // twice
  profile_error({"  compute_time_scale: -1\n", 19, "calibration.compute_time_scale"});
  profile_error({"  kernel_launch_us: -3\n", 19, "calibration.kernel_launch_us"});
  profile_error({"  host_fetch_call_us: 2e6\n", 19, "calibration.host_fetch_call_us"});
  profile_error({"  host_release_per_freed_param_us: -1\n", 19, "calibration.host_release_per_freed_param_us"});
  e = profile_error({"  allgather_bus_bandwidth_gb_per_s: 0\n", 19,
                     "calibration.allgather_bus_bandwidth_gb_per_s"});
  EXPECT_NE(e.expected().find("derived"), std::string::npos) << e.what();
  profile_error({"  reduce_scatter_bus_bandwidth_gb_per_s: -5\n", 19,
                 "calibration.reduce_scatter_bus_bandwidth_gb_per_s"});
  profile_error({"  collective_latency_us: -1\n", 19, "calibration.collective_latency_us"});
  profile_error({"  host_speed: 5000\n", 19, "calibration.host_speed"});
  profile_error({"  host_speed: 0\n", 19, "calibration.host_speed"});
  // Below 1/1000 of a GPU server's host (1e-20 once overflowed every host cost into a free host).
  const auto tiny = profile_error({"  host_speed: 1e-20\n", 19, "calibration.host_speed"});
  EXPECT_NE(tiny.expected().find("[0.001, 1000]"), std::string::npos) << tiny.what();
}

// An old profile or scenario that still sets a removed host key stops with the keys that replaced
// it, never running silently with costs it did not ask for.
TEST(CalibrationErrors, RemovedHostKeysNameTheirReplacements) {
  auto e = profile_error({"  hook_overhead_us: 20\n", 19, "calibration.hook_overhead_us"});
  EXPECT_NE(e.problem().find("removed"), std::string::npos) << e.what();
  for (const char* key : {"host_pre_forward_hook_us", "host_fetch_call_us", "host_release_call_us"}) {
    EXPECT_NE(e.expected().find(key), std::string::npos) << key << ": " << e.what();
  }
  e = profile_error({"  collective_launch_us: 20\n", 19, "calibration.collective_launch_us"});
  EXPECT_NE(e.expected().find("host_allgather_call_us"), std::string::npos) << e.what();
  EXPECT_NE(e.expected().find("host_reduce_scatter_call_us"), std::string::npos) << e.what();
  e = profile_error({"  host_overhead_scale: 2\n", 19, "calibration.host_overhead_scale"});
  EXPECT_NE(e.expected().find("host_speed"), std::string::npos) << e.what();
  // In a scenario's cluster.calibration, and from --set, alike.
  const auto from_scenario = scenario_error({"    hook_overhead_us: 20\n", 7, "cluster.calibration.hook_overhead_us"});
  EXPECT_NE(from_scenario.expected().find("host_post_backward_hook_us"), std::string::npos) << from_scenario.what();
  const auto from_set = scenario_error({"    gemm_efficiency: 0.5\n", 0, "cluster.calibration.collective_launch_us"},
                                       {"cluster.calibration.collective_launch_us=20"});
  EXPECT_EQ(from_set.where().file, "--set cluster.calibration.collective_launch_us");
}

TEST(CalibrationErrors, ProfileSectionWrongTypes) {
  profile_error({"  gemm_efficiency: fast\n", 19, "calibration.gemm_efficiency"});
  profile_error({"  kernel_launch_us: [5]\n", 19, "calibration.kernel_launch_us"});
  profile_error({"  collective_latency_us: {us: 5}\n", 19, "calibration.collective_latency_us"});
  profile_error({"  compute_time_scale: .inf\n", 19, "calibration.compute_time_scale"});
  profile_error({"  host_speed: true\n", 19, "calibration.host_speed"});
  // The section itself must be a mapping.
  TempDir dir("calibration");
  const fs::path file = dir.write("box.yaml", kProfileHead + "calibration: 0.8\n");
  const auto e = expect_input_error([&] { pc::load_hardware_profile(file); });
  EXPECT_EQ(e.where().line, 18);
  EXPECT_EQ(e.key(), "calibration");
}

TEST(CalibrationErrors, ScenarioOverrideIsStrictToo) {
  auto e = scenario_error({"    gemm_eficiency: 0.8\n", 7, "cluster.calibration.gemm_eficiency"});
  EXPECT_EQ(e.suggestion(), "gemm_efficiency");
  scenario_error({"    memory_efficiency: 1.5\n", 7, "cluster.calibration.memory_efficiency"});
  scenario_error({"    gemm_efficiency: 0.8\n    collective_latency_us: soon\n", 8,
                  "cluster.calibration.collective_latency_us"});
  scenario_error({"    allgather_bus_bandwidth_gb_per_s: 0\n", 7,
                  "cluster.calibration.allgather_bus_bandwidth_gb_per_s"});
  // A calibration key written directly under cluster: is still an unknown key there.
  TempDir dir("calibration-scenario");
  const fs::path file = dir.write("s.yaml",
                                  "model: tiny-llama\n"
                                  "training: {micro_batch: 1, seq_len: 128}\n"
                                  "cluster:\n"
                                  "  hardware: h100-sxm-8x\n"
                                  "  calibraton: {gemm_efficiency: 0.8}\n");
  e = expect_input_error([&] { pc::load_scenario(file, {}, kBundled); });
  EXPECT_EQ(e.where().line, 5);
  EXPECT_EQ(e.key(), "cluster.calibraton");
  EXPECT_EQ(e.suggestion(), "calibration");
}
