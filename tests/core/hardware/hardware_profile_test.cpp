// Hardware profiles: every bundled file loads, derived link rates match the vendors' figures, and
// every malformed file is an InputError naming file, line and key.
#include "core/hardware/hardware_profile.hpp"

#include <gtest/gtest.h>

#include "tests/support/input_error_testing.hpp"
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/hardware/hardware_derived.hpp"
#include "core/input/input_error.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;
namespace fs = std::filesystem;

namespace {

const fs::path kBundledDir = fs::path(PREFETCHLAB_SOURCE_DIR) / "hardware";
constexpr double kGB = 1e9;

pc::HardwareProfile bundled(const std::string& name) {
  return pc::load_hardware_profile(kBundledDir / (name + ".yaml"));
}

// A fresh file per test case, so parallel test runs never share one.
fs::path write_temp(const std::string& text) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::temp_directory_path() / "prefetchlab_hardware_test";
  fs::create_directories(dir);
  const fs::path file =
      dir / ("case_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".yaml");
  std::ofstream(file) << text;
  return file;
}

// Replaces 1-based line `line` of `text` (without its newline) by `replacement`.
std::string with_line(const std::string& text, int line, const std::string& replacement) {
  std::istringstream in(text);
  std::string out;
  std::string current;
  for (int n = 1; std::getline(in, current); ++n) out += (n == line ? replacement : current) + "\n";
  return out;
}


// Line numbers are used by the error cases below.
const std::string kNvlinkBox =
    "name: test-box\n"                     // 1
    "gpu:\n"                               // 2
    "  model: Test GPU\n"                  // 3
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

const std::string kPcieBox =
    "gpu:\n"                               // 1
    "  model: Test GPU\n"                  // 2
    "  memory: 24GiB\n"                    // 3
    "  bf16_dense_tflops: 165.2\n"         // 4
    "  memory_bandwidth_gb_per_s: 1008\n"  // 5
    "  sm_count: 128\n"                    // 6
    "gpus_per_node: 8\n"                   // 7
    "intra_node_link:\n"                   // 8
    "  kind: pcie\n"                       // 9
    "  pcie_generation: 4\n"               // 10
    "  pcie_lanes: 16\n"                   // 11
    "  peer_to_peer: false\n"              // 12
    "host_link:\n"                         // 13
    "  pcie_generation: 4\n"               // 14
    "  pcie_lanes: 16\n";                  // 15

struct BadCase {
  std::string file_text;
  int line;
  std::string key;
};

pc::InputError load_error(const BadCase& bad) {
  const fs::path file = write_temp(bad.file_text);
  auto e = expect_input_error([&] { pc::load_hardware_profile(file); });
  EXPECT_EQ(e.where().file, file.string()) << e.what();
  EXPECT_EQ(e.where().line, bad.line) << e.what();
  EXPECT_EQ(e.key(), bad.key) << e.what();
  return e;
}

}  // namespace

TEST(HardwareProfile, EveryBundledProfileLoads) {
  const auto names = pc::bundled_hardware_names(kBundledDir);
  const std::vector<std::string> expected{
      "a100-sxm-8x",   "b200-sxm-8x",           "h100-sxm-8x",         "h100-sxm-cluster",      "h200-sxm-8x",
      "l40s-8x-pcie4", "rtx2080ti-2x-pcie3-nop2p", "rtx4000ada-2x-pcie4", "rtx4090-8x-pcie4-nop2p"};
  EXPECT_EQ(names, expected);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const auto profile = bundled(name);
    EXPECT_EQ(profile.name, name);
    EXPECT_GT(profile.gpu.memory_bytes, 0);
    EXPECT_GT(profile.gpu.bf16_dense_flops_per_s, 0);
    EXPECT_GT(profile.gpu.memory_bandwidth_bytes_per_s, 0);
    EXPECT_GT(profile.gpu.sm_count, 0);
    EXPECT_GT(pc::intra_node_unidirectional_bytes_per_s(profile), 0);
    EXPECT_GT(pc::host_to_device_bytes_per_s(profile), 0);
    EXPECT_TRUE(profile.max_nodes == 1 || profile.network.has_value());
  }
}

TEST(HardwareProfile, ReadsFactsInSiUnits) {
  const auto h100 = bundled("h100-sxm-8x");
  EXPECT_EQ(h100.gpu.model, "NVIDIA H100 SXM 80GB");
  EXPECT_EQ(h100.gpu.memory_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(h100.gpu.bf16_dense_flops_per_s, 989e12);
  EXPECT_DOUBLE_EQ(h100.gpu.memory_bandwidth_bytes_per_s, 3350 * kGB);
  EXPECT_EQ(h100.gpu.sm_count, 132);
  EXPECT_EQ(h100.gpus_per_node, 8);
  const auto& nvlink = std::get<pc::NvlinkLink>(h100.intra_node_link);
  EXPECT_EQ(nvlink.generation, 4);
  EXPECT_EQ(nvlink.links_per_gpu, 18);
  EXPECT_TRUE(nvlink.nvswitch);
  EXPECT_EQ(h100.max_nodes, 1);

  const auto rtx4090 = bundled("rtx4090-8x-pcie4-nop2p");
  const auto& pcie = std::get<pc::PcieLink>(rtx4090.intra_node_link);
  EXPECT_EQ(pcie.generation, 4);
  EXPECT_EQ(pcie.lanes, 16);
  EXPECT_FALSE(pcie.peer_to_peer);
  EXPECT_FALSE(rtx4090.network.has_value());

  const auto cluster = bundled("h100-sxm-cluster");
  EXPECT_GT(cluster.max_nodes, 1);
  ASSERT_TRUE(cluster.network.has_value());
  EXPECT_EQ(cluster.network->nics_per_node, 8);
  EXPECT_DOUBLE_EQ(cluster.network->nic_bits_per_s, 400e9);
}

TEST(HardwareProfile, NameDefaultsToFileStem) {
  const fs::path file = write_temp(kPcieBox);
  EXPECT_EQ(pc::load_hardware_profile(file).name, file.stem().string());
}

TEST(HardwareProfile, BareNameResolvesToBundledFile) {
  const auto found = pc::find_hardware_profile("h100-sxm-8x", kBundledDir);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, kBundledDir / "h100-sxm-8x.yaml");
  EXPECT_EQ(pc::load_hardware_profile(*found).name, "h100-sxm-8x");
  // A path is taken as given.
  const fs::path file = write_temp(kPcieBox);
  EXPECT_EQ(pc::find_hardware_profile(file.string(), kBundledDir), file);
  EXPECT_FALSE(pc::find_hardware_profile("h100-sxm-9x", kBundledDir).has_value());
  EXPECT_FALSE(pc::find_hardware_profile("nowhere/h100-sxm-8x", kBundledDir).has_value());
  EXPECT_TRUE(pc::bundled_hardware_names(kBundledDir / "no-such-dir").empty());
}

TEST(HardwareDerived, IntraNodeUnidirectionalBandwidths) {
  EXPECT_DOUBLE_EQ(pc::intra_node_unidirectional_bytes_per_s(bundled("h100-sxm-8x")), 450 * kGB);
  EXPECT_DOUBLE_EQ(pc::intra_node_unidirectional_bytes_per_s(bundled("h200-sxm-8x")), 450 * kGB);
  EXPECT_DOUBLE_EQ(pc::intra_node_unidirectional_bytes_per_s(bundled("a100-sxm-8x")), 300 * kGB);
  EXPECT_DOUBLE_EQ(pc::intra_node_unidirectional_bytes_per_s(bundled("b200-sxm-8x")), 900 * kGB);
  EXPECT_NEAR(pc::intra_node_unidirectional_bytes_per_s(bundled("l40s-8x-pcie4")), 31.5 * kGB,
              0.1 * kGB);
}

TEST(HardwareDerived, PcieRatesFollowEncoding) {
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(3, 1), 0.985 * kGB, 0.001 * kGB);
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(4, 1), 1.97 * kGB, 0.01 * kGB);
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(5, 1), 3.94 * kGB, 0.01 * kGB);
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(3, 16), 15.75 * kGB, 0.01 * kGB);
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(4, 16), 31.5 * kGB, 0.05 * kGB);
  EXPECT_NEAR(pc::pcie_unidirectional_bytes_per_s(5, 16), 63.0 * kGB, 0.05 * kGB);
  EXPECT_DOUBLE_EQ(pc::pcie_unidirectional_bytes_per_s(4, 8),
                   pc::pcie_unidirectional_bytes_per_s(4, 16) / 2);
}

TEST(HardwareDerived, HostToDevicePrefersMeasuredValue) {
  const auto h200 = bundled("h200-sxm-8x");
  EXPECT_DOUBLE_EQ(pc::host_to_device_bytes_per_s(h200), 55.43 * kGB);
  EXPECT_DOUBLE_EQ(pc::device_to_host_bytes_per_s(h200), 55.06 * kGB);
  // No measurement: ~88% of Gen5 x16, ~80% of Gen4 x16.
  EXPECT_NEAR(pc::host_to_device_bytes_per_s(bundled("h100-sxm-8x")), 0.88 * 63.0 * kGB, 0.1 * kGB);
  EXPECT_NEAR(pc::host_to_device_bytes_per_s(bundled("a100-sxm-8x")), 0.80 * 31.5 * kGB, 0.1 * kGB);
  // Both directions at once: the measured bidirectional rate, else the one-way rate (full duplex).
  const auto rtx4090 = bundled("rtx4090-8x-pcie4-nop2p");
  EXPECT_DOUBLE_EQ(pc::host_to_device_bidirectional_bytes_per_s(rtx4090), 11.24 * kGB);
  EXPECT_DOUBLE_EQ(pc::device_to_host_bidirectional_bytes_per_s(rtx4090), pc::device_to_host_bytes_per_s(rtx4090));
  EXPECT_DOUBLE_EQ(pc::host_to_device_bidirectional_bytes_per_s(h200), 55.43 * kGB);
  EXPECT_EQ(rtx4090.host_link.gpus_per_switch_uplink, 1);
  const auto rtx2080ti = bundled("rtx2080ti-2x-pcie3-nop2p");
  EXPECT_EQ(rtx2080ti.host_link.gpus_per_switch_uplink, 2);
  EXPECT_DOUBLE_EQ(pc::host_to_device_bytes_per_s(rtx2080ti), 12.2 * kGB);
  EXPECT_DOUBLE_EQ(pc::device_to_host_bytes_per_s(rtx2080ti), 13.2 * kGB);
}

TEST(HardwareDerived, NetworkShareAndPeakFlops) {
  const auto cluster = bundled("h100-sxm-cluster");
  EXPECT_DOUBLE_EQ(*pc::network_bytes_per_s_per_gpu(cluster), 50 * kGB);  // 8 x 400 Gb / 8 GPUs
  EXPECT_FALSE(pc::network_bytes_per_s_per_gpu(bundled("l40s-8x-pcie4")).has_value());
  EXPECT_DOUBLE_EQ(*pc::peak_dense_flops_per_s(cluster, pc::DType::kBF16), 989e12);
  EXPECT_DOUBLE_EQ(*pc::peak_dense_flops_per_s(cluster, pc::DType::kFP32), 67e12);
  const auto b200 = bundled("b200-sxm-8x");
  EXPECT_FALSE(pc::peak_dense_flops_per_s(b200, pc::DType::kFP32).has_value());
  // fp16 without its own value falls back to the bf16 rate.
  const auto pcie_box = pc::load_hardware_profile(write_temp(kPcieBox));
  EXPECT_DOUBLE_EQ(*pc::peak_dense_flops_per_s(pcie_box, pc::DType::kFP16), 165.2e12);
}

TEST(HardwareProfileErrors, UnknownKeySuggestsClosest) {
  const auto e = load_error({with_line(kNvlinkBox, 6, "  memory_bandwith_gb_per_s: 3350"), 6,
                             "gpu.memory_bandwith_gb_per_s"});
  EXPECT_EQ(e.suggestion(), "memory_bandwidth_gb_per_s");
}

TEST(HardwareProfileErrors, UnknownTopLevelKeySuggestsClosest) {
  const auto e = load_error({kNvlinkBox + "netwrok:\n  nics_per_node: 8\n", 18, "netwrok"});
  EXPECT_EQ(e.suggestion(), "network");
}

// What CUDA reports on an empty device cannot exceed the card's memory (core/hardware/
// device_memory_budget.hpp takes the allocator's share from it).
TEST(HardwareProfileErrors, CudaMemoryAboveTheCardsMemory) {
  const auto e = load_error({with_line(kNvlinkBox, 6, "  memory_bandwidth_gb_per_s: 3350\n  cuda_memory: 90GiB"), 7,
                             "gpu.cuda_memory"});
  EXPECT_NE(e.problem().find("is more than memory"), std::string::npos) << e.what();
}

TEST(HardwareProfileErrors, WrongType) {
  load_error({with_line(kNvlinkBox, 7, "  sm_count: many"), 7, "gpu.sm_count"});
  load_error({with_line(kNvlinkBox, 14, "  nvswitch: maybe"), 14, "intra_node_link.nvswitch"});
  load_error({with_line(kNvlinkBox, 5, "  bf16_dense_tflops: [989]"), 5, "gpu.bf16_dense_tflops"});
}

TEST(HardwareProfileErrors, NegativeOrZeroRate) {
  const auto e = load_error({with_line(kNvlinkBox, 13, "  per_link_gb_per_s: -25"), 13,
                             "intra_node_link.per_link_gb_per_s"});
  EXPECT_NE(e.expected().find("> 0"), std::string::npos);
  load_error({with_line(kNvlinkBox, 6, "  memory_bandwidth_gb_per_s: 0"), 6,
              "gpu.memory_bandwidth_gb_per_s"});
}

TEST(HardwareProfileErrors, ZeroMemory) {
  load_error({with_line(kNvlinkBox, 4, "  memory: 0GiB"), 4, "gpu.memory"});
}

TEST(HardwareProfileErrors, BadPcieGeneration) {
  load_error(
      {with_line(kPcieBox, 10, "  pcie_generation: 2"), 10, "intra_node_link.pcie_generation"});
  load_error({with_line(kNvlinkBox, 16, "  pcie_generation: 7"), 16, "host_link.pcie_generation"});
}

TEST(HardwareProfileErrors, BadHostLinkSharing) {
  load_error({with_line(kNvlinkBox, 17, "  pcie_lanes: 16\n  gpus_per_switch_uplink: 0"), 18,
              "host_link.gpus_per_switch_uplink"});
  load_error({with_line(kNvlinkBox, 17, "  pcie_lanes: 16\n  measured_bidirectional_host_to_device_gb_per_s: -3"), 18,
              "host_link.measured_bidirectional_host_to_device_gb_per_s"});
}

TEST(HardwareProfileErrors, BadPcieWidth) {
  const auto e =
      load_error({with_line(kPcieBox, 11, "  pcie_lanes: 12"), 11, "intra_node_link.pcie_lanes"});
  EXPECT_EQ(e.expected(), "one of 1, 2, 4, 8, 16");
  load_error({with_line(kNvlinkBox, 17, "  pcie_lanes: 32"), 17, "host_link.pcie_lanes"});
}

TEST(HardwareProfileErrors, NvlinkOnlyKeyOnPcieLink) {
  const auto e = load_error({with_line(kPcieBox, 12, "  peer_to_peer: false\n  nvswitch: true"), 13,
                             "intra_node_link.nvswitch"});
  EXPECT_NE(e.problem().find("kind: nvlink"), std::string::npos) << e.what();
}

TEST(HardwareProfileErrors, PcieOnlyKeyOnNvlink) {
  load_error({with_line(kNvlinkBox, 14, "  nvswitch: true\n  peer_to_peer: true"), 15,
              "intra_node_link.peer_to_peer"});
}

TEST(HardwareProfileErrors, UnknownLinkKindSuggestsClosest) {
  const auto e =
      load_error({with_line(kNvlinkBox, 10, "  kind: nvlnk"), 10, "intra_node_link.kind"});
  EXPECT_EQ(e.suggestion(), "nvlink");
}

TEST(HardwareProfileErrors, MissingRequiredKey) {
  // A removed line leaves the section's own line as the place to add it.
  const auto e = load_error({with_line(kNvlinkBox, 7, ""), 2, "gpu.sm_count"});
  EXPECT_EQ(e.problem(), "is missing");
  load_error({with_line(kNvlinkBox, 10, ""), 9, "intra_node_link.kind"});
  load_error({with_line(kNvlinkBox, 8, ""), 1, "gpus_per_node"});
}

TEST(HardwareProfileErrors, MisspeltRequiredKeyIsReportedAsUnknown) {
  const auto e = load_error({with_line(kNvlinkBox, 7, "  sm_cuont: 132"), 7, "gpu.sm_cuont"});
  EXPECT_EQ(e.suggestion(), "sm_count");
}

TEST(HardwareProfileErrors, SeveralNodesNeedANetwork) {
  load_error({kNvlinkBox + "max_nodes: 4\n", 18, "max_nodes"});
}

TEST(HardwareProfileErrors, MissingFile) {
  const fs::path file = kBundledDir / "no-such-profile.yaml";
  const auto e = expect_input_error([&] { pc::load_hardware_profile(file); });
  EXPECT_EQ(e.where().file, file.string());
  EXPECT_EQ(e.where().line, 0);
  EXPECT_EQ(e.key(), "");
}
