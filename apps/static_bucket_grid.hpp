#pragma once
// The static prefetch buckets that `compare` and `tune` measure to find a scenario's best static
// bucket: a x2 grid from 1e5 (min_bucket_numel's default) up to max_live, beyond which the
// coordinator's prefetch budget min(max_live - n_available, bucket) cannot grow.
#include <cstdint>
#include <vector>

namespace prefetchlab::apps {

inline std::vector<std::int64_t> static_bucket_grid(std::int64_t max_live_numel) {
  std::vector<std::int64_t> grid;
  for (std::int64_t b = 100'000; b <= max_live_numel; b *= 2) grid.push_back(b);
  return grid;
}

}  // namespace prefetchlab::apps
