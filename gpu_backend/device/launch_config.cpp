#include "gpu_backend/device/launch_config.hpp"

#include <algorithm>
#include <stdexcept>

namespace prefetchlab::gpu {

bool all_aligned_16(std::initializer_list<std::uint64_t> addresses) {
  return std::all_of(addresses.begin(), addresses.end(),
                     [](std::uint64_t a) { return a % static_cast<std::uint64_t>(kVectorBytes) == 0; });
}

ElementwiseLaunch plan_elementwise_launch(std::int64_t numel, std::int64_t element_bytes, bool operands_aligned_16,
                                          int sm_count) {
  if (element_bytes <= 0 || element_bytes > kVectorBytes || sm_count <= 0) {
    throw std::invalid_argument("element-wise launch: element size and SM count must be positive");
  }
  ElementwiseLaunch launch;
  launch.threads = kElementwiseThreads;
  launch.vector_width = operands_aligned_16 ? static_cast<int>(kVectorBytes / element_bytes) : 1;
  const std::int64_t steps = (std::max<std::int64_t>(numel, 0) + launch.vector_width - 1) / launch.vector_width;
  const std::int64_t wanted = (steps + launch.threads - 1) / launch.threads;
  const std::int64_t cap = static_cast<std::int64_t>(sm_count) * kElementwiseBlocksPerSm;
  launch.blocks = static_cast<std::uint32_t>(std::clamp<std::int64_t>(wanted, 1, cap));
  return launch;
}

RowLaunch plan_row_launch(std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) throw std::invalid_argument("row launch: rows and cols must be positive");
  if (rows > 0x7fffffff) throw std::invalid_argument("row launch: more rows than one grid dimension holds");
  RowLaunch launch;
  launch.blocks = static_cast<std::uint32_t>(rows);
  const std::int64_t warps = std::clamp<std::int64_t>((cols + 31) / 32, 1, 32);
  launch.threads = static_cast<std::uint32_t>(warps * 32);
  return launch;
}

}  // namespace prefetchlab::gpu
