// calibrate --backend's collective fits: an op whose times do not grow with size (a machine too
// busy to measure) keeps the base's figures and says so, while the other op's fit stands.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "apps/measured_collectives.hpp"

namespace pa = prefetchlab::apps;
namespace pg = prefetchlab::gpu;

namespace {

// 2 ranks: t = 20 us + (n-1)/n * S / 10 GB/s per size, or ~2.5 ms whatever the size (each
// rendezvous waited for a time slice; the largest size happened to be the fastest).
std::vector<pg::CollectiveTiming> timings(bool flat) {
  std::vector<pg::CollectiveTiming> out;
  const std::vector<std::int64_t> sizes = {4096, 65536, 1048576, 4194304};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double us = flat ? 2600.0 - 200.0 * static_cast<double>(i) : 20.0 + 0.5 * static_cast<double>(sizes[i]) / 1e4;
    out.push_back({sizes[i], sizes[i] / 4, us, us});
  }
  return out;
}

}  // namespace

TEST(MeasuredCollectives, AnOpThatDoesNotGrowWithSizeKeepsTheBaseAndTheOtherStands) {
  pg::MicrobenchmarkResults r;
  r.all_gather = timings(/*flat=*/true);
  r.reduce_scatter = timings(/*flat=*/false);
  const pa::MeasuredCollectives m = pa::fit_measured_collectives(r, 2, "host", 0.05);
  ASSERT_EQ(m.not_fitted, std::vector<std::string>{"all_gather"});
  EXPECT_EQ(m.values.count("allgather_bus_bandwidth_gb_per_s"), 0u);
  EXPECT_EQ(m.values.count("collective_latency_us"), 0u);  // all_gather's: not fitted either
  ASSERT_EQ(m.values.count("reduce_scatter_bus_bandwidth_gb_per_s"), 1u);
  EXPECT_NEAR(std::stod(m.values.at("reduce_scatter_bus_bandwidth_gb_per_s")), 10.0, 0.01);
  EXPECT_EQ(m.values.at("collective_model"), "ring");
  EXPECT_EQ(m.curves_yaml.find("op: all_gather"), std::string::npos) << m.curves_yaml;
  EXPECT_NE(m.curves_yaml.find("op: reduce_scatter"), std::string::npos) << m.curves_yaml;
  EXPECT_NE(m.profile_notes.find("all_gather: not fitted (times did not grow with size)"), std::string::npos)
      << m.profile_notes;
}

TEST(MeasuredCollectives, NothingFittedLeavesTheBasesCollectiveModel) {
  pg::MicrobenchmarkResults r;
  r.all_gather = timings(/*flat=*/true);
  r.reduce_scatter = timings(/*flat=*/true);
  const pa::MeasuredCollectives m = pa::fit_measured_collectives(r, 2, "host", 0.05);
  EXPECT_EQ(m.not_fitted.size(), 2u);
  EXPECT_TRUE(m.values.empty());
  EXPECT_TRUE(m.curves_yaml.empty());
}
