#pragma once
// What of a GPU's memory PyTorch's caching allocator can have in a ZeRO-3 training process: what
// CUDA reports on an empty device (less than the card's nominal size: the driver keeps some),
// less what the process holds outside the allocator's tensors — the CUDA context, NCCL's
// buffers, and the cuBLAS workspaces PyTorch keeps per thread and stream. Out-of-memory verdicts
// use it; `run` and `describe` show it.
#include <cstdint>
#include <string>

#include "core/hardware/hardware_profile.hpp"

namespace prefetchlab::core {

struct DeviceMemoryBudget {
  std::int64_t cuda_total_bytes = 0;  // gpu.cuda_memory, or gpu.memory where a profile lacks it
  std::int64_t context_bytes = 0;
  std::int64_t nccl_bytes = 0;
  std::int64_t cublas_workspace_bytes = 0;
  int nccl_communicators = 0;
  int nccl_channels = 0;
  bool nccl_nvls = false;
  std::int64_t outside_allocator_bytes() const { return context_bytes + nccl_bytes + cublas_workspace_bytes; }
  // What the caching allocator may reserve: never below 0.
  std::int64_t allocator_capacity_bytes() const;
  // "79535 MiB for PyTorch's allocator of the 81089 MiB CUDA reports (context 400, NCCL 1088:
  // 2 communicators x 24 channels + NVLS, cuBLAS 66)"
  std::string text() const;
};

// The budget of one rank of a job of `world_size` ranks on `nodes` nodes of `profile`.
DeviceMemoryBudget device_memory_budget(const HardwareProfile& profile, std::int64_t world_size, std::int64_t nodes);

}  // namespace prefetchlab::core
