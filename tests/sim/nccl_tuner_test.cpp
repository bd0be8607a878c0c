// NCCL-tuner collective model (sim/nccl_tuner_cost_model.hpp) against NCCL's tuner
// (NVIDIA/nccl src/graph/tuning.cc) and published nccl-tests figures, the `collective` and `calibrate`
// commands, the nccl-tests log parser and fit, and the shape-dependent GEMM efficiency.
// docs/collectives.md's predicted-vs-published busBW table is regenerated here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"
#include "core/hardware/collective_fit.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/compute_model.hpp"
#include "sim/nccl_tuner_cost_model.hpp"
#include "sim/world.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
namespace fs = std::filesystem;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);
constexpr double kGB = 1e9;

pc::HardwareProfile profile(const std::string& name) {
  return pc::load_hardware_profile(kSourceDir / "hardware" / (name + ".yaml"));
}
ps::NcclTunerCostModel tuner(const std::string& name) {
  const auto p = profile(name);
  return ps::NcclTunerCostModel(p, p.calibration);
}

// nccl-tests' busbw for a predicted call.
double busbw(const ps::NcclTunerCostModel& m, ps::CollectiveKind kind, std::int64_t bytes, int ranks,
             ps::AlgorithmFilter filter = ps::AlgorithmFilter::kRing) {
  const auto c = m.choose({kind, bytes, ranks, 1}, filter);
  const double factor = (kind == ps::CollectiveKind::kAllReduce ? 2.0 : 1.0) * (ranks - 1) / ranks;
  return static_cast<double>(bytes) / (static_cast<double>(c.duration_ns) * 1e-9) * factor;
}

struct Published {
  std::string profile;
  ps::CollectiveKind kind;
  int ranks;
  std::int64_t bytes;
  ps::AlgorithmFilter algo;
  double published_gbps;  // 0 = none published
  std::string source;
  double tolerance;       // 0 = not a target
};

const std::vector<Published>& published() {
  constexpr std::int64_t GiB = 1LL << 30;
  using K = ps::CollectiveKind;
  using A = ps::AlgorithmFilter;
  static const std::vector<Published> rows{
      {"h100-sxm-8x", K::kAllGather, 8, 8 * GiB, A::kRing, 360, "NVIDIA/nccl-tests #326 (~360)", 0.05},
      {"h200-sxm-8x", K::kAllGather, 8, 16 * GiB, A::kRing, 361.4, "stas00 ml-engineering network/README.md", 0.05},
      {"h200-sxm-8x", K::kReduceScatter, 8, 16 * GiB, A::kRing, 362.9, "stas00 ml-engineering network/README.md", 0},
      {"h200-sxm-8x", K::kAllReduce, 8, 16 * GiB, A::kRing, 367.2, "stas00 (NVLS off)", 0},
      {"h200-sxm-8x", K::kAllReduce, 8, 16 * GiB, A::kNvls, 480.0, "stas00 (NVLS)", 0},
      {"a100-sxm-8x", K::kAllReduce, 8, 8 * GiB, A::kRing, 235, "stas00 ml-engineering case study", 0.10},
      {"b200-sxm-8x", K::kAllReduce, 8, 8 * GiB, A::kRing, 682, "stas00 ml-engineering network/README.md", 0.10},
      {"b200-sxm-8x", K::kAllReduce, 8, 8 * GiB, A::kNvls, 838, "stas00 (NVLS)", 0},
      {"l40s-8x-pcie4", K::kAllGather, 8, 8 * GiB, A::kRing, 0, "", 0},
      {"rtx4000ada-2x-pcie4", K::kAllGather, 2, 1 * GiB, A::kRing, 0, "(estimate 20-24 GB/s)", 0},
      {"rtx4090-8x-pcie4-nop2p", K::kAllGather, 8, 8 * GiB, A::kRing, 0, "", 0},
  };
  return rows;
}

std::string busbw_table() {
  std::ostringstream out;
  out << "| profile | collective | ranks | size | algorithm | predicted busBW (GB/s) | published (GB/s) | "
         "difference | source |\n|---|---|---:|---:|---|---:|---:|---:|---|\n";
  for (const auto& r : published()) {
    const auto m = tuner(r.profile);
    const double predicted = busbw(m, r.kind, r.bytes, r.ranks, r.algo) / kGB;
    char line[512];
    std::string pub = "no published figure";
    std::string diff = "-";
    if (r.published_gbps > 0) {
      char b[64];
      std::snprintf(b, sizeof b, "%.1f", r.published_gbps);
      pub = b;
      std::snprintf(b, sizeof b, "%+.1f%%", 100 * (predicted - r.published_gbps) / r.published_gbps);
      diff = b;
    }
    std::snprintf(line, sizeof line, "| %s | %s | %d | %lld GiB | %s | %.1f | %s | %s | %s |\n",
                  r.profile.c_str(), ps::collective_kind_name(r.kind), r.ranks,
                  static_cast<long long>(r.bytes >> 30),
                  r.algo == ps::AlgorithmFilter::kNvls ? "NVLS" : "RING", predicted, pub.c_str(),
                  diff.c_str(), r.source.empty() ? "-" : r.source.c_str());
    out << line;
  }
  return out.str();
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// --- Published figures and the docs table ------------------------------------------------

TEST(NcclTuner, LargeMessageBusBandwidthMatchesPublished) {
  for (const auto& r : published()) {
    if (r.tolerance <= 0) continue;
    const double predicted = busbw(tuner(r.profile), r.kind, r.bytes, r.ranks, r.algo);
    EXPECT_NEAR(predicted / kGB, r.published_gbps, r.tolerance * r.published_gbps)
        << r.profile << " " << ps::collective_kind_name(r.kind);
  }
}

TEST(NcclTuner, DocsTableIsRegenerated) {
  const std::string begin = "<!-- nccl-busbw-table:begin (regenerated by tests/sim/nccl_tuner_test.cpp) -->\n";
  const std::string end = "<!-- nccl-busbw-table:end -->";
  const fs::path readme = kSourceDir / "docs/collectives.md";
  std::string text = read_text(readme);
  const auto b = text.find(begin);
  const auto e = text.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/collectives.md lacks the table markers";
  ASSERT_NE(e, std::string::npos);
  const std::string current = text.substr(b + begin.size(), e - b - begin.size());
  const std::string fresh = busbw_table();
  if (current != fresh && std::getenv("PREFETCHLAB_UPDATE_DOCS")) {
    text.replace(b + begin.size(), e - b - begin.size(), fresh);
    std::ofstream(readme) << text;
    return;
  }
  EXPECT_EQ(current, fresh) << "docs/collectives.md table is stale: rerun with PREFETCHLAB_UPDATE_DOCS=1";
}

TEST(NcclTuner, SmallMessages) {
  // 8x H200 all_gather of 8 KiB: 8-20 us (LL, one channel).
  const auto h200 = tuner("h200-sxm-8x");
  const auto c = h200.choose({ps::CollectiveKind::kAllGather, 8192, 8, 1});
  EXPECT_EQ(c.protocol, ps::NcclProtocol::kLL);
  EXPECT_GE(c.duration_ns, 8'000);
  EXPECT_LE(c.duration_ns, 20'000);
  // 2x RTX 4000 Ada: 8 B in 7-15 us, 1 GiB at 20-24 GB/s busBW.
  const auto ada = tuner("rtx4000ada-2x-pcie4");
  const auto tiny = ada.choose({ps::CollectiveKind::kAllGather, 8, 2, 1});
  EXPECT_GE(tiny.duration_ns, 7'000);
  EXPECT_LE(tiny.duration_ns, 15'000);
  const double gib = busbw(ada, ps::CollectiveKind::kAllGather, 1LL << 30, 2) / kGB;
  EXPECT_GE(gib, 20);
  EXPECT_LE(gib, 24);
}

TEST(NcclTuner, RingGraphFromLinkFacts) {
  // Search: highest channels x speed; H100 18 x 20.6 = 370.8 -> 6 x 60 = 360, duplicated to 12 x 30.
  EXPECT_EQ(tuner("h100-sxm-8x").ring_graph_channels(), 12);
  EXPECT_DOUBLE_EQ(tuner("h100-sxm-8x").derived_ring_bus_bandwidth_bytes_per_s(8, 1), 360 * kGB);
  EXPECT_DOUBLE_EQ(tuner("a100-sxm-8x").derived_ring_bus_bandwidth_bytes_per_s(8, 1), 240 * kGB);
  EXPECT_DOUBLE_EQ(tuner("b200-sxm-8x").derived_ring_bus_bandwidth_bytes_per_s(8, 1), 720 * kGB);
  // PCIe Gen4 x16 as NCCL sees it: 24 GB/s -> 2 x 12; without P2P half through host memory.
  EXPECT_DOUBLE_EQ(tuner("rtx4000ada-2x-pcie4").derived_ring_bus_bandwidth_bytes_per_s(2, 1), 24 * kGB);
  EXPECT_DOUBLE_EQ(tuner("rtx4090-8x-pcie4-nop2p").derived_ring_bus_bandwidth_bytes_per_s(8, 1), 12 * kGB);
}

TEST(NcclTuner, ProtocolSwitchPoints) {
  // 8x H100 all_gather: LL (10.8 us, min(141, 180) GB/s), LL128 (27.3 us, min(0.92 x 360,
  // 12 x 36.7) = 331.2), Simple (32.2 us, 360). Tuner crossings:
  //   LL -> LL128 at x = 16.5 us / (1/141 - 1/331.2) GB/s, S = 8/7 x;  LL128 -> Simple likewise.
  const auto m = tuner("h100-sxm-8x");
  const double x1 = 16.5e-6 / (1 / 141e9 - 1 / 331.2e9);
  const double x2 = 4.9e-6 / (1 / 331.2e9 - 1 / 360e9);
  const auto s1 = static_cast<std::int64_t>(x1 * 8 / 7);
  const auto s2 = static_cast<std::int64_t>(x2 * 8 / 7);
  const auto at = [&](std::int64_t s) { return m.choose({ps::CollectiveKind::kAllGather, s, 8, 1}).protocol; };
  EXPECT_EQ(at(s1 - 4096), ps::NcclProtocol::kLL);
  EXPECT_EQ(at(s1 + 4096), ps::NcclProtocol::kLL128);
  EXPECT_EQ(at(s2 - 65536), ps::NcclProtocol::kLL128);
  EXPECT_EQ(at(s2 + 65536), ps::NcclProtocol::kSimple);
  // PCIe: no LL128; LL -> Simple on 2x RTX 4000 Ada where 7.6 + x/12 = 14.1 + x/24 (us, GB/s).
  const auto ada = tuner("rtx4000ada-2x-pcie4");
  const double x3 = 6.5e-6 / (1 / 12e9 - 1 / 24e9);
  const auto s3 = static_cast<std::int64_t>(x3 * 2);
  EXPECT_EQ(ada.choose({ps::CollectiveKind::kAllGather, s3 - 1024, 2, 1}).protocol, ps::NcclProtocol::kLL);
  EXPECT_EQ(ada.choose({ps::CollectiveKind::kAllGather, s3 + 1024, 2, 1}).protocol, ps::NcclProtocol::kSimple);
  EXPECT_FALSE(ada.evaluate({ps::CollectiveKind::kAllGather, 1 << 20, 2, 1}, ps::NcclAlgorithm::kRing,
                            ps::NcclProtocol::kLL128));
}

TEST(NcclTuner, LatencyConstants) {
  const auto m = tuner("h100-sxm-8x");
  const ps::CollectiveShape ag{ps::CollectiveKind::kAllGather, 1 << 20, 8, 1};
  EXPECT_EQ(m.evaluate(ag, ps::NcclAlgorithm::kRing, ps::NcclProtocol::kLL)->latency_ns, 10'800);
  EXPECT_EQ(m.evaluate(ag, ps::NcclAlgorithm::kRing, ps::NcclProtocol::kLL128)->latency_ns, 27'300);
  EXPECT_EQ(m.evaluate(ag, ps::NcclAlgorithm::kRing, ps::NcclProtocol::kSimple)->latency_ns, 32'200);
  EXPECT_EQ(m.evaluate(ag, ps::NcclAlgorithm::kNvls, ps::NcclProtocol::kSimple)->latency_ns, 25'000);
  EXPECT_FALSE(m.evaluate(ag, ps::NcclAlgorithm::kNvls, ps::NcclProtocol::kLL));
  // PCI hop class; without P2P every step pays the SHM extra.
  const ps::CollectiveShape pci{ps::CollectiveKind::kAllGather, 1 << 20, 8, 1};
  EXPECT_EQ(tuner("l40s-8x-pcie4").evaluate(pci, ps::NcclAlgorithm::kRing, ps::NcclProtocol::kSimple)->latency_ns, 48'300);
  EXPECT_EQ(tuner("rtx4090-8x-pcie4-nop2p").evaluate(pci, ps::NcclAlgorithm::kRing, ps::NcclProtocol::kSimple)->latency_ns,
            48'300 + 7 * 1'500);
}

TEST(NcclTuner, NvlsOnlyOnNvswitchHopperAndLarger) {
  const auto h200 = tuner("h200-sxm-8x");
  EXPECT_TRUE(h200.nvls_available({ps::CollectiveKind::kAllReduce, 0, 8, 1}));
  EXPECT_FALSE(tuner("a100-sxm-8x").nvls_available({ps::CollectiveKind::kAllReduce, 0, 8, 1}));
  EXPECT_FALSE(tuner("l40s-8x-pcie4").nvls_available({ps::CollectiveKind::kAllReduce, 0, 8, 1}));
  // All-reduce: ring LL small, NVLS large (observed on 8x H200: LL to 1 MiB, NVLS from 2 MiB).
  EXPECT_EQ(h200.choose({ps::CollectiveKind::kAllReduce, 8192, 8, 1}).algorithm, ps::NcclAlgorithm::kRing);
  EXPECT_EQ(h200.choose({ps::CollectiveKind::kAllReduce, 1LL << 30, 8, 1}).algorithm, ps::NcclAlgorithm::kNvls);
  // All-gather stays ring at large sizes (NVLS AG busBW 259 < 360).
  EXPECT_EQ(h200.choose({ps::CollectiveKind::kAllGather, 1LL << 30, 8, 1}).algorithm, ps::NcclAlgorithm::kRing);
  EXPECT_THROW(tuner("a100-sxm-8x").choose({ps::CollectiveKind::kAllReduce, 1 << 20, 8, 1}, ps::AlgorithmFilter::kNvls),
               std::invalid_argument);
}

TEST(NcclTuner, ChannelsShrinkForSmallMessages) {
  const auto m = tuner("h100-sxm-8x");
  EXPECT_EQ(m.choose({ps::CollectiveKind::kAllGather, 8192, 8, 1}).channels, 1);
  EXPECT_EQ(m.choose({ps::CollectiveKind::kAllGather, 1 << 30, 8, 1}).channels, 12);
  const auto simple = m.evaluate({ps::CollectiveKind::kAllGather, 4 * 32768, 8, 1}, ps::NcclAlgorithm::kRing,
                                 ps::NcclProtocol::kSimple);
  EXPECT_EQ(simple->channels, 4);  // one channel per 32 KiB
  EXPECT_GT(simple->duration_ns, simple->tuner_ns);
}

TEST(NcclTuner, MultiNodeTwoTiers) {
  const auto m = tuner("h100-sxm-cluster");
  // Simple: 8.4 + 14 x max(3.4, 3.0) + 1 x 14.0 = 70.0 us for 16 ranks on 2 nodes.
  EXPECT_EQ(m.evaluate({ps::CollectiveKind::kAllGather, 1 << 30, 16, 2}, ps::NcclAlgorithm::kRing,
                       ps::NcclProtocol::kSimple)->latency_ns, 70'000);
  // LL: 6.6 + 14 x max(0.6, 1.0) + 2.7 = 23.3 us.
  EXPECT_EQ(m.evaluate({ps::CollectiveKind::kAllGather, 8, 16, 2}, ps::NcclAlgorithm::kRing,
                       ps::NcclProtocol::kLL)->latency_ns, 23'300);
  // One GPU per node: one NIC (400 Gb x 0.97) bounds the ring.
  EXPECT_DOUBLE_EQ(m.derived_ring_bus_bandwidth_bytes_per_s(2, 2), 48.5 * kGB);
  EXPECT_FALSE(m.nvls_available({ps::CollectiveKind::kAllReduce, 0, 16, 2}));
}

TEST(NcclTuner, CalibrationOverridesWin) {
  auto p = profile("h100-sxm-8x");
  p.calibration.collective_latency_ns = 10'000;
  p.calibration.allgather_bus_bandwidth_bytes_per_s = 100 * kGB;
  p.calibration.reduce_scatter_bus_bandwidth_bytes_per_s = 50 * kGB;
  const ps::NcclTunerCostModel m(p, p.calibration);
  const std::int64_t s = 800'000'000;
  EXPECT_EQ(m.duration_ns({ps::CollectiveKind::kAllGather, s, 8, 1}), 10'000 + 7'000'000);
  EXPECT_EQ(m.duration_ns({ps::CollectiveKind::kReduceScatter, s, 8, 1}), 10'000 + 14'000'000);
  EXPECT_EQ(m.duration_ns({ps::CollectiveKind::kAllReduce, s, 8, 1}), 10'000 + 21'000'000);
  EXPECT_FALSE(m.nvls_available({ps::CollectiveKind::kAllReduce, s, 8, 1}));
  p.calibration.all_reduce_bus_bandwidth_bytes_per_s = 175 * kGB;
  const ps::NcclTunerCostModel ar(p, p.calibration);
  EXPECT_EQ(ar.duration_ns({ps::CollectiveKind::kAllReduce, s, 8, 1}), 10'000 + 8'000'000);
  // The factory's default is this model.
  const auto h = profile("h200-sxm-8x");
  const auto f = ps::make_collective_cost_model(h, h.calibration);
  EXPECT_EQ(f->duration_ns({ps::CollectiveKind::kAllGather, 8192, 8, 1}),
            tuner("h200-sxm-8x").duration_ns({ps::CollectiveKind::kAllGather, 8192, 8, 1}));
}

TEST(NcclTuner, NoP2pSlowsTheSimulatedStep) {
  // The bundled 2x RTX 4000 Ada scenario with its GPUs' peer-to-peer switched off.
  TempDir dir("nop2p");
  std::string text = read_text(kSourceDir / "hardware/rtx4000ada-2x-pcie4.yaml");
  const auto at = text.find("peer_to_peer: true");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "peer_to_peer: false");
  const fs::path hw = dir.write("nop2p.yaml", text);
  const auto bundled = pc::BundledData::from_root(kSourceDir);
  const auto step = [&](const std::vector<std::string>& set) {
    std::vector<std::string> o = set;
    o.push_back("output.trace=false");
    const auto s = pc::load_scenario(kSourceDir / "scenarios/bert-base-qa-2x-rtx4000ada.yaml", o, bundled);
    ps::World world(s, false);
    const auto r = world.run();
    EXPECT_EQ(r.status, pc::RunStatus::kOk) << r.message;
    return pc::summarize(r.metrics, static_cast<int>(s.training.warmup_iterations)).steady_step_time_ns;
  };
  EXPECT_GT(step({"cluster.hardware=" + hw.string()}), step({}));
}

// --- nccl-tests output, parsing and calibration ---------------------------------------------

TEST(CollectiveCommand, PrintsNcclTestsLayout) {
  const auto r = run_cli("collective --hardware h200-sxm-8x --op all_gather --ranks 8 -b 8KiB -e 1MiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"),
            std::string::npos);
  EXPECT_NE(r.output.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"),
            std::string::npos);
  // 8 KiB over 8 ranks in bf16: 512 elements per rank; redop none, root -1, #wrong N/A.
  EXPECT_NE(r.output.find("        8192           512  bfloat16    none      -1    11.41    0.72    0.63    N/A    11.41    0.72    0.63    N/A\n"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# Chosen algorithm/protocol/channels by size: 8 KiB - 1 MiB: RING/LL 1-12 channels"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# Avg bus bandwidth    : "), std::string::npos);
  const auto bad = run_cli("collective --hardware h200-sxm-8x --op all_gather --ranks 8 -b 1XB");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  const auto nvls = run_cli("collective --hardware a100-sxm-8x --op all_reduce --ranks 8 --algo nvls");
  EXPECT_EQ(nvls.exit_code, 2) << nvls.output;
}

TEST(NcclTestsLog, LauncherPrefixesAndOpDetection) {
  const std::string text =
      "0: # nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor)\n"
      "[1,0]<stdout>:#  Rank  0 Group  0 Pid 1 on a device  0 [0x00] GPU\n"
      "[1,0]<stdout>:#  Rank  3 Group  0 Pid 1 on a device  3 [0x00] GPU\n"
      "host:1:1 [0] NCCL INFO Channel 00/24\n"
      "mpirun -np 4 ./build/all_reduce_perf -b 8 -e 64\n"
      "0:            8             2     float     sum      -1    12.49    0.00    0.00      0    12.61    0.00    0.00      0\n"
      "[1,0]<stdout>:           16             4     float     sum      -1    12.52    0.00    0.00      0    12.51    0.00    0.00      0\n"
      "# Avg bus bandwidth    : 0.001 \n";
  const auto log = pc::parse_nccl_tests_log(text, "x.log");
  ASSERT_TRUE(log.op);
  EXPECT_EQ(*log.op, pc::NcclTestsOp::kAllReduce);
  EXPECT_EQ(log.ranks, 4);
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_EQ(log.rows[1].bytes, 16);
  EXPECT_DOUBLE_EQ(log.rows[1].time_us, 12.52);
  EXPECT_EQ(log.rows[1].line, 7);
  EXPECT_DOUBLE_EQ(*log.avg_bus_bandwidth_gb_per_s, 0.001);
}

TEST(NcclTestsLog, MalformedRowNamesFileAndLine) {
  const std::string text =
      "./build/all_gather_perf -b 8\n"
      "           8             2     float    none      -1    12.49    0.00    0.00      0\n"
      "          16             4     float    none      -1    fast    0.00    0.00      0\n";
  try {
    pc::parse_nccl_tests_log(text, "bad.log");
    FAIL() << "expected an InputError";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.where().file, "bad.log");
    EXPECT_EQ(e.where().line, 3);
  }
  TempDir dir("badlog");
  const auto f = dir.write("bad.log", text);
  const auto r = run_cli("calibrate --from-nccl-tests " + f.string() + " --hardware h100-sxm-8x -o " +
                         (dir.path() / "o.yaml").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.log:3"), std::string::npos) << r.output;
}

TEST(Calibrate, RecoversTheModelFromItsOwnTables) {
  struct Case {
    std::string hw, op;
    int ranks;
  };
  for (const Case& c : {Case{"h200-sxm-8x", "all_gather", 8}, Case{"a100-sxm-8x", "all_reduce", 8},
                        Case{"rtx4000ada-2x-pcie4", "reduce_scatter", 2}, Case{"h100-sxm-cluster", "all_gather", 16}}) {
    SCOPED_TRACE(c.hw + " " + c.op);
    TempDir dir("calibrate");
    const auto table = run_cli("collective --hardware " + c.hw + " --op " + c.op + " --ranks " +
                               std::to_string(c.ranks) + " -b 8 -e 8GiB");
    ASSERT_EQ(table.exit_code, 0) << table.output;
    const auto log = dir.write("model.log", table.output);
    const auto out = dir.path() / "cal.yaml";
    const auto r = run_cli("calibrate --from-nccl-tests " + log.string() + " --hardware " + c.hw + " -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto cal = pc::load_hardware_profile(out).calibration;
    const auto m = tuner(c.hw);
    const auto kind = c.op == "all_gather"       ? ps::CollectiveKind::kAllGather
                      : c.op == "reduce_scatter" ? ps::CollectiveKind::kReduceScatter
                                                 : ps::CollectiveKind::kAllReduce;
    const int nodes = c.ranks > 8 ? c.ranks / 8 : 1;
    const auto smallest = m.choose({kind, 8, c.ranks, nodes});
    const auto largest = m.choose({kind, 8LL << 30, c.ranks, nodes});
    ASSERT_TRUE(cal.collective_latency_ns);
    EXPECT_NEAR(static_cast<double>(*cal.collective_latency_ns), static_cast<double>(smallest.latency_ns),
                0.02 * static_cast<double>(smallest.latency_ns));
    const auto& bw = kind == ps::CollectiveKind::kAllGather       ? cal.allgather_bus_bandwidth_bytes_per_s
                     : kind == ps::CollectiveKind::kReduceScatter ? cal.reduce_scatter_bus_bandwidth_bytes_per_s
                                                                  : cal.all_reduce_bus_bandwidth_bytes_per_s;
    ASSERT_TRUE(bw);
    EXPECT_NEAR(*bw, largest.bus_bandwidth_bytes_per_s, 0.02 * largest.bus_bandwidth_bytes_per_s);
  }
}

TEST(Calibrate, RealLogFromNcclIssue1435) {
  // tests/data/nccl-issue-1435-all_gather_perf.log: 2 GPUs, bf16 all_gather, from
  // https://github.com/NVIDIA/nccl/issues/1435. The fit predicts the log's own busbw at every
  // size within 3%, and its bus bandwidth is within 3% of the log's best large-message reading.
  const fs::path file = kSourceDir / "tests/data/nccl-issue-1435-all_gather_perf.log";
  const auto log = pc::read_nccl_tests_log(file);
  ASSERT_EQ(*log.op, pc::NcclTestsOp::kAllGather);
  ASSERT_EQ(log.ranks, 2);
  std::vector<pc::FitPoint> pts;
  double best = 0;
  for (const auto& row : log.rows) {
    pts.push_back({row.bytes, row.time_us});
    best = std::max(best, row.busbw_gb_per_s);
  }
  const auto fit = pc::fit_collective(pts, 0.5, 0.02);
  for (std::size_t i = 0; i < fit.points.size(); ++i) {
    const double logged = log.rows[i].busbw_gb_per_s;  // rows are already in size order
    const double predicted = 0.5 * static_cast<double>(fit.points[i].bytes) / (fit.predicted_us[i] * 1e3);
    EXPECT_NEAR(predicted, logged, 0.03 * logged) << fit.points[i].bytes;
  }
  EXPECT_NEAR(fit.bus_bandwidth_gb_per_s(), best, 0.03 * best);
  TempDir dir("real");
  const auto r = run_cli("calibrate --from-nccl-tests " + file.string() + " --hardware rtx4000ada-2x-pcie4 -o " +
                         (dir.path() / "box.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto cal = pc::load_hardware_profile(dir.path() / "box.yaml").calibration;
  EXPECT_NEAR(*cal.allgather_bus_bandwidth_bytes_per_s / kGB, fit.bus_bandwidth_gb_per_s(), 0.01);
}

TEST(CollectiveFit, EndToEndBandwidthIsTheFallbackWhereTheLargestSizesLookFlat) {
  // A noisy sweep: 20 us + S / (0.5 x 10 GB/s) except that the 4 MiB point caught a stall and the
  // 16 MiB one did not, so the largest range's line falls. The two ends still give a bus
  // bandwidth: 0.5 x (16 MiB - 4 KiB) / (t16M - t4K).
  const auto t = [](std::int64_t bytes) { return 20.0 + 0.5 * static_cast<double>(bytes) / 10e9 * 1e6; };
  std::vector<pc::FitPoint> pts{{4 << 10, t(4 << 10)}, {64 << 10, t(64 << 10)}, {1 << 20, t(1 << 20)},
                                {4 << 20, t(16 << 20) + 500}, {16 << 20, t(16 << 20)}};
  const auto fit = pc::fit_collective(pts, 0.5, 0.02);
  EXPECT_LE(fit.bus_bandwidth_gb_per_s(), 0.0);
  const double expected = 0.5 * static_cast<double>((16 << 20) - (4 << 10)) / ((t(16 << 20) - t(4 << 10)) * 1e3);
  EXPECT_NEAR(fit.end_to_end_bus_bandwidth_gb_per_s(), expected, 1e-9);
  EXPECT_NEAR(fit.end_to_end_bus_bandwidth_gb_per_s(), 10.0, 0.01);
  // The largest size no slower than the smallest: nothing can be said.
  pts.back().time_us = pts.front().time_us;
  EXPECT_EQ(pc::fit_collective(pts, 0.5, 0.02).end_to_end_bus_bandwidth_gb_per_s(), 0.0);
}

// --- Compute: GEMM efficiency by shape ----------------------------------------------------

TEST(ComputeModelShape, ReproducesTheH100MatmulSweep) {
  // zzc0721/torch-performance-test-data #79: 176.6 / 676.6 / 788.7 / 797.5 TFLOPS.
  const auto p = profile("h100-sxm-8x");
  const ps::ComputeModel m(p, p.calibration, pc::DType::kBF16);
  const std::vector<std::pair<std::int64_t, double>> sweep{{1024, 176.6}, {2048, 676.6}, {4096, 788.7}, {8192, 797.5}};
  for (const auto& [n, tflops] : sweep) {
    const double t = static_cast<double>(m.gemm_ns(n, n, n)) * 1e-9;
    const double nd = static_cast<double>(n);
    const double achieved = 2.0 * nd * nd * nd / t / 1e12;
    EXPECT_NEAR(achieved, tflops, 0.03 * tflops) << n;
  }
  // Linear modules: N*K from the per-token FLOPs equals the weight's gemm_in x gemm_out.
  EXPECT_LT(m.gemm_shape_fraction(1e9), 0.3);
  EXPECT_GT(m.gemm_shape_fraction(1e12), 0.99);
}

TEST(Calibrate, SharedCoresContentionModel) {
  TempDir dir("sharedcores");
  const std::string base = read_text(kSourceDir / "hardware/h100-sxm-8x.yaml");
  const auto good = dir.write("good.yaml", base + "calibration:\n  contention_model: shared_cores\n  shared_cores: 3\n");
  const auto c = pc::load_hardware_profile(good).calibration;
  EXPECT_EQ(c.contention_model, pc::CalibrationConstants::ContentionModel::kSharedCores);
  EXPECT_EQ(c.shared_cores, 3);
  EXPECT_EQ(pc::CalibrationConstants{}.contention_model, pc::CalibrationConstants::ContentionModel::kFactors);
  // Each bad combination names the key and its line.
  struct Bad {
    std::string calibration, key;
    int line;  // within the calibration section, 1 = its first key
  };
  const Bad bads[] = {
      {"  contention_model: shared_cores\n", "shared_cores", 0},  // missing: the section's line
      {"  contention_model: shared_cores\n  shared_cores: 0\n", "shared_cores", 2},
      {"  contention_model: shared_cores\n  shared_cores: 2\n  contention_compute_factor: 0.2\n",
       "contention_compute_factor", 3},
      {"  shared_cores: 2\n", "shared_cores", 1},
      {"  contention_model: cores\n", "contention_model", 1},
      {"  shared_cores_collective_penalty: 0.5\n", "shared_cores_collective_penalty", 1},
  };
  const int section_line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 1;
  for (const Bad& bad : bads) {
    const auto file = dir.write("bad.yaml", base + "calibration:\n" + bad.calibration);
    try {
      pc::load_hardware_profile(file);
      ADD_FAILURE() << "accepted:\n" << bad.calibration;
    } catch (const pc::InputError& e) {
      EXPECT_EQ(e.key(), "calibration." + bad.key) << bad.calibration << e.what();
      EXPECT_EQ(e.where().line, section_line + bad.line) << bad.calibration << e.what();
    }
  }
}

TEST(Calibrate, NewCalibrationKeysAndABaseWithItsOwnSection) {
  TempDir dir("calkeys");
  std::string base = read_text(kSourceDir / "hardware/h100-sxm-8x.yaml");
  base += "calibration:\n  gemm_efficiency: 0.7\n  collective_model: ring\n  contention_compute_factor: 0\n"
          "  contention_collective_factor: 0.5\n  all_reduce_bus_bandwidth_gb_per_s: 300\n";
  const auto file = dir.write("base.yaml", base);
  const auto c = pc::load_hardware_profile(file).calibration;
  EXPECT_EQ(c.collective_model, pc::CalibrationConstants::CollectiveModel::kRing);
  EXPECT_DOUBLE_EQ(c.contention_compute_factor, 0);
  EXPECT_DOUBLE_EQ(c.contention_collective_factor, 0.5);
  EXPECT_DOUBLE_EQ(*c.all_reduce_bus_bandwidth_bytes_per_s, 300e9);
  const pc::CalibrationConstants defaults;
  EXPECT_DOUBLE_EQ(defaults.contention_compute_factor, 0.19);
  EXPECT_EQ(defaults.collective_model, pc::CalibrationConstants::CollectiveModel::kNcclTuner);
  // calibrate over a base that already has a calibration section keeps its other keys.
  const auto table = run_cli("collective --hardware h100-sxm-8x --op all_reduce --ranks 8 -b 8 -e 4GiB");
  ASSERT_EQ(table.exit_code, 0);
  const auto log = dir.write("ar.log", table.output);
  const auto out = dir.path() / "cal.yaml";
  const auto r = run_cli("calibrate --from-nccl-tests " + log.string() + " --hardware " + file.string() + " -o " +
                         out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto written = pc::load_hardware_profile(out);
  EXPECT_EQ(written.name, "cal");
  EXPECT_DOUBLE_EQ(written.calibration.gemm_efficiency, 0.7);
  EXPECT_NE(*written.calibration.all_reduce_bus_bandwidth_bytes_per_s, 300e9);
}
