#pragma once
// How a row-major gpu::GemmArgs maps onto cuBLAS's column-major GEMM, and the shape checks every
// device runs before a GEMM (so a bad call fails the same way on the host device in CI as on a
// GPU, instead of cuBLAS reading out of bounds).
//
// A row-major R x C matrix with row stride ld is the column-major C x R matrix with the same ld.
// So row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets B as its first
// operand and A as its second, with m and n swapped and each op kept (X^T stored row-major is
// X stored column-major). Pure host code: tested in CI without a GPU.
#include <cstdint>

#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu {

// The arguments of cublasGemmStridedBatchedEx (cublasGemmEx when batch_count == 1), in
// cuBLAS's column-major terms. `first` is cuBLAS's A (our B), `second` its B (our A).
struct CublasGemmPlan {
  bool transpose_first = false, transpose_second = false;
  std::int64_t m = 0, n = 0, k = 0;  // cuBLAS's: m = our n, n = our m
  DeviceSpan first, second, c;
  std::int64_t ld_first = 0, ld_second = 0, ldc = 0;
  std::int64_t stride_first = 0, stride_second = 0, stride_c = 0;  // elements
  std::int64_t batch_count = 1;
};

// Throws std::invalid_argument naming what is wrong: a non-positive size or batch count, a
// leading dimension shorter than its matrix's rows, a size beyond cuBLAS's 32-bit int, batched
// outputs that overlap, or a span too short for the matrices it must hold.
void check_gemm(const GemmArgs& args);

// check_gemm, then the column-major arguments.
CublasGemmPlan plan_cublas_gemm(const GemmArgs& args);

// Batch `index` of a batched GEMM as a plain one (batch_count 1), for devices that loop.
GemmArgs gemm_batch(const GemmArgs& args, std::int64_t index);

}  // namespace prefetchlab::gpu
