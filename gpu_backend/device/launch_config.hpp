#pragma once
// Grid sizes of the CUDA device's memory-bound kernels, computed on the host (cuda_device.cpp
// passes them to cuda_kernels.cu) so the choice is tested in CI without a GPU.
//
// Element-wise passes read and write 16 bytes per thread per step when every operand is 16-byte
// aligned (8 bf16 or 4 fp32 elements: one 128-bit load, as PyTorch's vectorised element-wise
// loops do, aten/src/ATen/native/cuda/MemoryAccess.cuh), else one element; a grid-stride loop
// covers what one wave of resident blocks does not, so the grid is capped at a few blocks per SM.
// Row kernels (LayerNorm) take one block per row, its threads striding over the row.
#include <cstdint>
#include <initializer_list>

namespace prefetchlab::gpu {

struct ElementwiseLaunch {
  std::uint32_t blocks = 1;
  std::uint32_t threads = 256;
  int vector_width = 1;  // elements per thread per step
};

inline constexpr std::uint32_t kElementwiseThreads = 256;
inline constexpr int kElementwiseBlocksPerSm = 8;  // 8 x 256 threads: a full H100/H200 SM
inline constexpr std::int64_t kVectorBytes = 16;

// True when every non-zero address is a multiple of 16 (a zero address is an absent operand).
bool all_aligned_16(std::initializer_list<std::uint64_t> addresses);

// numel elements of element_bytes each; sm_count from cudaDevAttrMultiProcessorCount.
ElementwiseLaunch plan_elementwise_launch(std::int64_t numel, std::int64_t element_bytes, bool operands_aligned_16,
                                          int sm_count);

struct RowLaunch {
  std::uint32_t blocks = 1;   // one per row
  std::uint32_t threads = 32; // a multiple of the warp, at most 1024
};

// One block per row of `cols` elements; threads cover the row in one step up to 1024.
RowLaunch plan_row_launch(std::int64_t rows, std::int64_t cols);

// LayerNorm's dgamma/dbeta: blocks of 32 columns x kColumnSumRows threads, each summing a
// stride of the rows (one block per 32 columns).
inline constexpr std::uint32_t kColumnSumRows = 16;
// (Inline: the CUDA kernels' library calls it and links below this one.)
inline std::uint32_t column_sum_blocks(std::int64_t cols) { return static_cast<std::uint32_t>(cols > 0 ? (cols + 31) / 32 : 1); }

}  // namespace prefetchlab::gpu
