#include "sim/ranks/rank_symmetry.hpp"

#include <algorithm>

namespace prefetchlab::sim {

std::string RankCollapse::text() const {
  return std::to_string(simulated_ranks) + " of " + std::to_string(world_size);
}

namespace {

// Why ranks of this scenario can differ, or "" when they cannot.
std::string asymmetry(const core::Scenario& scenario) {
  const core::NoiseConfig& noise = scenario.noise;
  // Each rank draws from its own stream of the seed (rank_process.cpp).
  if (noise.compute_jitter > 0) return "noise.compute_jitter draws each rank's kernel times";
  if (noise.host_jitter > 0) return "noise.host_jitter draws each rank's host times";
  if (noise.host_timer_noise_ns > 0) return "noise.host_timer_noise_us draws each rank's timer readings";
  if (!noise.slow_ranks.empty()) {
    return "noise.slow_ranks makes rank " + std::to_string(noise.slow_ranks.begin()->first) + " slower than the others";
  }
  const auto world = scenario.cluster.world_size();
  for (const core::DivergenceConfig& d : scenario.divergence) {
    if (d.ranks.empty()) continue;  // every rank skips the same modules
    std::vector<int> ranks = d.ranks;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (static_cast<std::int64_t>(ranks.size()) < world) {
      return "divergence in iteration " + std::to_string(d.iteration) + " skips modules on some ranks only";
    }
  }
  if (scenario.moe.enabled) return "moe: each rank routes its own tokens to the experts";
  if (scenario.cluster.calibration.contention_model == core::CalibrationConstants::ContentionModel::kSharedCores) {
    return "calibration.contention_model shared_cores: the ranks of a node contend for its CPU cores";
  }
  return "";
}

}  // namespace

RankCollapse plan_rank_collapse(const core::Scenario& scenario, RankSimulation mode) {
  RankCollapse plan;
  plan.world_size = static_cast<int>(scenario.cluster.world_size());
  plan.simulated_ranks = plan.world_size;
  if (plan.world_size == 1) return plan;
  plan.full_because = mode == RankSimulation::kEveryRank ? "every rank was asked for (outputs read rank by rank)"
                                                         : asymmetry(scenario);
  if (plan.full_because.empty()) plan.simulated_ranks = 1;
  return plan;
}

}  // namespace prefetchlab::sim
