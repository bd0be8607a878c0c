#pragma once
// The CUDA device's memory-bound kernels (cuda_kernels.cu): one grid-stride pass each, in the
// operands' element type with fp32 arithmetic. Host-callable; asynchronous on `stream`.
#include <cuda_runtime.h>

#include <cstdint>

namespace prefetchlab::gpu::cuda {

enum class KernelType { kBF16, kFP16, kFP32 };
enum class KernelOp { kScale, kMultiply, kAxpy };

// dst = alpha * a | a * b | dst + alpha * a, over numel elements.
cudaError_t launch_elementwise(KernelOp op, KernelType type, void* dst, const void* a, const void* b,
                               std::int64_t numel, float alpha, cudaStream_t stream);

// One Adam step: fp32 master, exp_avg, exp_avg_sq; grads and params in `param_type`.
cudaError_t launch_adam(KernelType param_type, void* params, const void* grads, float* master, float* exp_avg,
                        float* exp_avg_sq, std::int64_t numel, float lr, float beta1, float beta2, float eps,
                        std::int64_t step, cudaStream_t stream);

}  // namespace prefetchlab::gpu::cuda
