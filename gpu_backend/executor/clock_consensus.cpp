#include "gpu_backend/executor/clock_consensus.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace prefetchlab::gpu {

std::int64_t consensus_clock_shift_ns(std::span<const double> exits_since_first_ns, int world, int rounds, int rank) {
  if (world < 1 || rounds < 2 || rank < 0 || rank >= world ||
      exits_since_first_ns.size() != static_cast<std::size_t>(world) * static_cast<std::size_t>(rounds)) {
    throw std::invalid_argument("consensus_clock_shift_ns: needs world x rounds exit times, rounds >= 2");
  }
  const auto at = [&](int r, int k) {
    return exits_since_first_ns[static_cast<std::size_t>(r) * static_cast<std::size_t>(rounds) + static_cast<std::size_t>(k)];
  };
  std::vector<double> distances;
  for (int k = 1; k < rounds; ++k) {
    double mean = 0;
    for (int r = 0; r < world; ++r) mean += at(r, k) / world;
    distances.push_back(at(rank, k) - mean);
  }
  const auto middle = distances.begin() + static_cast<std::ptrdiff_t>(distances.size() / 2);
  std::nth_element(distances.begin(), middle, distances.end());
  return std::llround(*middle);
}

}  // namespace prefetchlab::gpu
