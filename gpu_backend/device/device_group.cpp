#include "gpu_backend/device/device_group.hpp"

namespace prefetchlab::gpu {

std::vector<int> DeviceGroup::local_ranks() const {
  // A group whose ranks are processes holds exactly its link's rank.
  if (const int own = process_rank(); own >= 0) return {own};
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) ranks.push_back(r);
  return ranks;
}

}  // namespace prefetchlab::gpu
