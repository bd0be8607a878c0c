#pragma once
// The launch plan of a multi-tensor Adam step: many parameter tensors updated by few kernel
// launches, each block taking one fixed-size chunk of one tensor, and each launch carrying its
// tensors' addresses and a block -> (tensor, chunk) table in its kernel arguments. This is
// PyTorch's multi_tensor_apply (the one behind torch.optim.Adam(fused=True) and _foreach_*;
// aten/src/ATen/native/cuda/MultiTensorApply.cuh, after NVIDIA apex's multi_tensor_apply.cuh):
// chunks of 65536 elements, at most 320 blocks per launch, and for 5 tensor lists (param, grad,
// fp32 master, exp_avg, exp_avg_sq) at most 30 tensors per launch, so the table fits CUDA's
// 4 KiB of kernel arguments. Pure host code: tested in CI; the host device also runs its Adam
// through this plan so the plan's coverage is checked with real numbers.
#include <cstdint>
#include <vector>

namespace prefetchlab::gpu {

struct AdamChunkLimits {
  std::int64_t chunk_numel = 65536;
  int max_tensors_per_launch = 30;
  int max_blocks_per_launch = 320;
};

struct AdamLaunch {
  std::vector<int> tensors;  // indices into the step's tensor list; slot = position here
  struct Block {
    int slot = 0;              // which of `tensors`
    std::int64_t chunk = 0;    // elements [chunk * chunk_numel, min(+chunk_numel, numel))
  };
  std::vector<Block> blocks;
};

// Every chunk of every non-empty tensor exactly once, in tensor order; a tensor whose chunks
// do not fit the current launch continues in the next. Throws std::invalid_argument for a
// negative numel or non-positive limits.
std::vector<AdamLaunch> plan_adam_chunks(const std::vector<std::int64_t>& tensor_numels, const AdamChunkLimits& limits = {});

}  // namespace prefetchlab::gpu
