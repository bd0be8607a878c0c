#include "core/metrics/rank_imbalance.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/metrics/metrics.hpp"

namespace prefetchlab::core {

double median_rank_imbalance(std::span<const RankIterationCompute> computes, int ranks, int warmup_iterations) {
  std::map<int, std::map<int, std::int64_t>> by_iteration;  // iteration -> rank -> compute
  for (const auto& c : computes) {
    if (c.iteration > warmup_iterations) by_iteration[c.iteration][c.rank] += c.compute_ns;
  }
  std::vector<double> imbalances;
  for (const auto& [iteration, per_rank] : by_iteration) {
    if (static_cast<int>(per_rank.size()) != ranks) continue;
    double sum = 0, most = 0;
    for (const auto& [rank, ns] : per_rank) {
      sum += static_cast<double>(ns);
      most = std::max(most, static_cast<double>(ns));
    }
    if (sum > 0) imbalances.push_back(most / (sum / ranks) - 1);
  }
  return median(std::move(imbalances));  // 0 when no iteration qualifies
}

}  // namespace prefetchlab::core
