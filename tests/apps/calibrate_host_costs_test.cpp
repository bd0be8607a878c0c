// calibrate --from-host-costs: a machine whose torch calls cost half the defaults' gets
// host_speed 2 (the median over the calls it measured), the profile it writes loads and carries
// it, and what is not one of bench/host_costs/torch_call_host_costs.py's files is exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/hardware/hardware_profile.hpp"
#include "tests/support/cli_runner.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

constexpr const char* kHeader = "call,bytes_per_rank,world_size,way,us_per_call,calls,repeats,torch,nccl,gpu,cpu\n";

// The defaults' price of each call at host_speed 1 (sim/cost/host_cost_model.hpp): the all-gather
// call over one tensor, the reduce-scatter call, the in-place all-reduce.
struct Defaults {
  double all_gather_us, reduce_scatter_us, all_reduce_us;
};
Defaults defaults_of(const std::string& profile) {
  const auto c = pc::load_hardware_profile(profile).calibration;
  return {static_cast<double>(c.host_allgather_call_ns + c.host_allgather_per_param_ns) / 1e3,
          static_cast<double>(c.host_reduce_scatter_call_ns) / 1e3, static_cast<double>(c.host_all_reduce_call_ns) / 1e3};
}

std::string row(const std::string& call, long long bytes, const std::string& way, double us) {
  return call + "," + std::to_string(bytes) + ",1," + way + "," + std::to_string(us) + ",40,5,2.9,2.27.3,H100,Xeon\n";
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

double host_speed_of(const std::filesystem::path& profile) {
  return pc::load_hardware_profile(profile).calibration.host_speed;
}

}  // namespace

TEST(CalibrateHostCosts, HalfTheDefaultsCostIsHostSpeedTwo) {
  TempDir dir("host-costs");
  const Defaults d = defaults_of("hardware/h100-sxm-8x.yaml");
  // Each call at half its default price; larger sizes, other ways and other calls are there too
  // and must not change the answer.
  const auto csv = dir.write("costs.csv", std::string(kHeader) + row("all_reduce", 4096, "issue", d.all_reduce_us / 2) +
                                              row("all_reduce", 1048576, "issue", d.all_reduce_us) +
                                              row("all_reduce", 4096, "profiled", d.all_reduce_us) +
                                              row("all_gather", 4096, "issue", d.all_gather_us / 2) +
                                              row("all_gather", 1048576, "issue", d.all_gather_us) +
                                              row("all_gather", 4096, "synchronized", d.all_gather_us * 3) +
                                              row("reduce_scatter", 4096, "issue", d.reduce_scatter_us / 2) +
                                              row("barrier", 0, "issue", 5));
  const auto out = dir.path() / "fast-host.yaml";
  const auto r = run_cli("calibrate --from-host-costs " + csv.string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(host_speed_of(out), 2.0, 1e-3) << r.output;
  EXPECT_NE(r.output.find("host_speed 2.000 (median of 3 call(s))"), std::string::npos) << r.output;
}

TEST(CalibrateHostCosts, TheMedianCallSetsTheSpeedAndTheBaseIsKept) {
  TempDir dir("host-costs-median");
  const Defaults d = defaults_of("hardware/a100-sxm-8x.yaml");
  // Speeds 1.5, 3 and 0.8: the median, 1.5, whatever the outliers; a spread this wide is said.
  const auto csv = dir.write("costs.csv", std::string(kHeader) + row("all_gather", 4096, "issue", d.all_gather_us / 1.5) +
                                              row("reduce_scatter", 4096, "issue", d.reduce_scatter_us / 3) +
                                              row("all_reduce", 4096, "issue", d.all_reduce_us / 0.8));
  const auto out = dir.path() / "a100.yaml";
  const auto r = run_cli("calibrate --from-host-costs " + csv.string() + " --base a100-sxm-8x -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(host_speed_of(out), 1.5, 1e-3) << r.output;
  EXPECT_NE(r.output.find("differ 3.8x"), std::string::npos) << r.output;
  const auto base = pc::load_hardware_profile("hardware/a100-sxm-8x.yaml");
  const auto written = pc::load_hardware_profile(out);
  EXPECT_EQ(written.calibration.host_allgather_call_ns, base.calibration.host_allgather_call_ns);
  EXPECT_EQ(written.gpu.model, base.gpu.model);
}

// Times that imply a host no machine has (1000x a GPU server's) are refused naming the CSV, and
// write nothing (issue 46, W2).
TEST(CalibrateHostCosts, ASpeedNoHostHasIsExitTwo) {
  TempDir dir("host-costs-implausible");
  const Defaults d = defaults_of("hardware/h100-sxm-8x.yaml");
  const double too_fast_us = std::max(0.1, d.all_gather_us / 5000);
  const auto csv = dir.write("costs.csv", std::string(kHeader) + row("all_gather", 4096, "issue", too_fast_us) +
                                              row("reduce_scatter", 4096, "issue", std::max(0.1, d.reduce_scatter_us / 5000)));
  const auto out = dir.path() / "p.yaml";
  const auto r = run_cli("calibrate --from-host-costs " + csv.string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("outside what any host is"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CalibrateHostCosts, WhatIsNotTheScriptsCsvIsExitTwo) {
  TempDir dir("host-costs-bad");
  const auto out = (dir.path() / "x.yaml").string();
  const auto only_barrier = dir.write("barrier.csv", std::string(kHeader) + row("barrier", 0, "issue", 30));
  auto r = run_cli("calibrate --from-host-costs " + only_barrier.string() + " -o " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'call'"), std::string::npos) << r.output;

  const auto bad_time = dir.write("bad.csv", std::string(kHeader) + "all_reduce,4096,1,issue,n/a,40,5,2.9,2.27.3,H100,Xeon\n");
  r = run_cli("calibrate --from-host-costs " + bad_time.string() + " -o " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.csv:2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("us_per_call"), std::string::npos) << r.output;

  r = run_cli("calibrate --from-host-costs " + (dir.path() / "missing.csv").string() + " -o " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot read"), std::string::npos) << r.output;

  r = run_cli("calibrate --from-host-costs " + bad_time.string() + " --from-nccl-tests x.log -o " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("more than one is given"), std::string::npos) << r.output;

  for (const std::string option : {"--scenario scenarios/default.yaml", "--ranks 8", "--op all_reduce", "--iterations 3",
                                    "--tolerance 0.1", "--step-marker x"}) {
    r = run_cli("calibrate --from-host-costs " + only_barrier.string() + " " + option + " -o " + out);
    EXPECT_EQ(r.exit_code, 2) << option << "\n" << r.output;
    EXPECT_NE(r.output.find("key '" + option.substr(0, option.find(' ')) + "'"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A fit whose profile would not load leaves the existing -o profile as it was (issue 46, D1: it
// was written first and checked after). A 1e-300 us call fits an infinite host_speed.
TEST(CalibrateHostCosts, AProfileThatWouldNotLoadReplacesNothing) {
  TempDir dir("host-costs-d1");
  const Defaults d = defaults_of("hardware/h100-sxm-8x.yaml");
  const auto good_csv = dir.write("good.csv", std::string(kHeader) + row("all_reduce", 4096, "issue", d.all_reduce_us / 2));
  const auto out = dir.path() / "host.yaml";
  ASSERT_EQ(run_cli("calibrate --from-host-costs " + good_csv.string() + " -o " + out.string()).exit_code, 0);
  const std::string before = read_text(out);

  const auto bad_csv = dir.write("bad.csv", std::string(kHeader) + "all_reduce,4096,1,issue,1e-300,40,5,2.9,2.27.3,H100,Xeon\n");
  const auto r = run_cli("calibrate --from-host-costs " + bad_csv.string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(read_text(out), before) << r.output;
  EXPECT_NEAR(host_speed_of(out), 2.0, 1e-3);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".calibrate-")) << "staging folder left behind";
  }
}
