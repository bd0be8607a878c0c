#include "core/moe/router.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prefetchlab::core {

std::int64_t expert_capacity_tokens(const RouterSpec& spec) {
  if (spec.capacity_factor <= 0) return 0;
  const double per_expert =
      static_cast<double>(spec.tokens) * static_cast<double>(spec.top_k) / static_cast<double>(spec.experts);
  return static_cast<std::int64_t>(std::ceil(spec.capacity_factor * per_expert));
}

ExpertLoad route_micro_batch(const RouterSpec& spec, const std::vector<int>& popularity,
                             const std::function<double()>& uniform) {
  if (spec.experts <= 0 || spec.top_k < 1 || spec.top_k > spec.experts || spec.tokens < 0 ||
      popularity.size() != static_cast<std::size_t>(spec.experts)) {
    throw std::invalid_argument("route_micro_batch: bad router spec");
  }
  const auto experts = static_cast<std::size_t>(spec.experts);
  // Weight per popularity rank.
  std::vector<double> weight(experts, 1.0);
  if (spec.routing == MoeRouting::kZipf) {
    for (std::size_t r = 0; r < experts; ++r) weight[r] = std::pow(static_cast<double>(r + 1), -spec.zipf_exponent);
  }
  double total = 0;
  for (const double w : weight) total += w;

  ExpertLoad load;
  load.tokens.assign(experts, 0);
  std::vector<char> taken(experts, 0);
  std::vector<std::size_t> picked;
  picked.reserve(static_cast<std::size_t>(spec.top_k));
  for (std::int64_t t = 0; t < spec.tokens; ++t) {
    double left = total;
    picked.clear();
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      // Sampling without replacement: draw among the experts this token has not picked yet.
      const double target = uniform() * left;
      double sum = 0;
      std::size_t chosen = experts;
      std::size_t last_free = experts;
      for (std::size_t r = 0; r < experts; ++r) {
        if (taken[r]) continue;
        last_free = r;
        sum += weight[r];
        if (target < sum) {
          chosen = r;
          break;
        }
      }
      if (chosen == experts) chosen = last_free;  // rounding at the top end
      taken[chosen] = 1;
      left -= weight[chosen];
      picked.push_back(chosen);
      ++load.tokens[static_cast<std::size_t>(popularity[chosen])];
    }
    for (const std::size_t r : picked) taken[r] = 0;
  }
  if (const std::int64_t capacity = expert_capacity_tokens(spec); capacity > 0) {
    for (auto& n : load.tokens) {
      if (n > capacity) {
        load.dropped_tokens += n - capacity;
        n = capacity;
      }
    }
  }
  return load;
}

}  // namespace prefetchlab::core
