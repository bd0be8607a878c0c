// The error band on every answer (apps/fidelity_band.hpp): `run` prints and records how far the
// fidelity corpus's nearest cases were off, out of sample, from bench/fidelity/results.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"

namespace {

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

// Llama-2-7B on 8 H100: the band holds Hopper cases only, each named, with the median of their
// out-of-sample errors as results.json gives them (signed as speed).
TEST(FidelityBand, RunRecordsTheNearestCasesOfItsGpuGeneration) {
  TempDir dir("fidelity-band");
  const auto r = run_cli("run scenarios/default.yaml -o " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: default: cases like this (Hopper, "), std::string::npos) << r.output;
  const auto band = read_json(dir.path() / "summary.json")["fidelity_band"];
  ASSERT_TRUE(band.is_object());
  EXPECT_EQ(band["gpu_generation"], "Hopper");
  const auto results = read_json(kSourceDir / "bench/fidelity/results.json");
  std::vector<double> errors;
  for (const auto& name : band["cases"]) {
    bool found = false;
    for (const auto& c : results["cases"]) {
      if (c["case"] != name) continue;
      found = true;
      const std::string gpu = c["gpu"].get<std::string>();
      EXPECT_TRUE(gpu.find("H100") != std::string::npos || gpu.find("H200") != std::string::npos ||
                  gpu.find("H800") != std::string::npos)
          << name << " runs on " << gpu;
      // Within 8x of 8 ranks, since the corpus has at least 3 such Hopper cases.
      EXPECT_LE(c["ranks"].get<int>(), 64) << name;
      const double e = c["out_of_sample"]["error"].get<double>();
      errors.push_back(c["metric"] == "step_time_s" ? -e : e);
    }
    EXPECT_TRUE(found) << name;
  }
  ASSERT_GE(errors.size(), 3u);
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  EXPECT_NEAR(band["faster_than_measured_median"].get<double>(), median, 1e-12);
  EXPECT_NEAR(band["faster_than_measured_min"].get<double>(), errors.front(), 1e-12);
  EXPECT_NEAR(band["faster_than_measured_max"].get<double>(), errors.back(), 1e-12);
}

// A GPU generation the corpus does not hold says so rather than borrowing another's errors.
TEST(FidelityBand, AGenerationWithoutCasesSaysTheErrorIsUnknown) {
  TempDir dir("fidelity-band-ada");
  const auto r = run_cli("run scenarios/bert-base-qa-2x-rtx4000ada.yaml --no-expect --set training.iterations=3 -o " +
                         dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto band = read_json(dir.path() / "summary.json")["fidelity_band"];
  EXPECT_EQ(band["gpu_generation"], "Ada");
  EXPECT_TRUE(band["cases"].empty());
  EXPECT_EQ(band["text"], "no fidelity-corpus case runs on Ada GPUs: how far this answer is off is unknown");
}
