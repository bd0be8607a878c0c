#include "gpu_backend/device_group.hpp"

#include "gpu_backend/process_link.hpp"

namespace prefetchlab::gpu {

std::vector<int> DeviceGroup::local_ranks() const {
  // A group whose ranks are processes holds exactly its link's rank.
  if (const ProcessLink* link = process_link()) return {link->rank()};
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) ranks.push_back(r);
  return ranks;
}

}  // namespace prefetchlab::gpu
