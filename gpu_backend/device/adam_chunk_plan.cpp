#include "gpu_backend/device/adam_chunk_plan.hpp"

#include <stdexcept>
#include <string>

namespace prefetchlab::gpu {

std::vector<AdamLaunch> plan_adam_chunks(const std::vector<std::int64_t>& tensor_numels, const AdamChunkLimits& limits) {
  if (limits.chunk_numel <= 0 || limits.max_tensors_per_launch <= 0 || limits.max_blocks_per_launch <= 0) {
    throw std::invalid_argument("multi-tensor Adam: chunk size and per-launch limits must be positive");
  }
  std::vector<AdamLaunch> launches;
  AdamLaunch current;
  auto flush = [&] {
    if (!current.blocks.empty()) launches.push_back(std::move(current));
    current = AdamLaunch{};
  };
  for (std::size_t t = 0; t < tensor_numels.size(); ++t) {
    const std::int64_t numel = tensor_numels[t];
    if (numel < 0) throw std::invalid_argument("multi-tensor Adam: tensor " + std::to_string(t) + " has a negative numel");
    const std::int64_t chunks = (numel + limits.chunk_numel - 1) / limits.chunk_numel;
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (static_cast<int>(current.blocks.size()) == limits.max_blocks_per_launch) flush();
      const bool listed = !current.tensors.empty() && current.tensors.back() == static_cast<int>(t);
      if (!listed) {
        if (static_cast<int>(current.tensors.size()) == limits.max_tensors_per_launch) flush();
        current.tensors.push_back(static_cast<int>(t));
      }
      current.blocks.push_back({static_cast<int>(current.tensors.size()) - 1, c});
    }
  }
  flush();
  return launches;
}

}  // namespace prefetchlab::gpu
