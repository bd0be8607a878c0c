#pragma once
// The CUDA device's memory-bound kernels (cuda_kernels.cu, cuda_layer_kernels.cu,
// cuda_multi_tensor_adam.cu), in the operands' element type with fp32 arithmetic. Grid sizes
// come from launch_config.hpp / adam_chunk_plan.hpp (host code, tested in CI). Host-callable;
// asynchronous on `stream`. No project header beyond those two: nvcc compiles these as C++17.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gpu_backend/device/adam_chunk_plan.hpp"
#include "gpu_backend/device/launch_config.hpp"

namespace prefetchlab::gpu::cuda {

enum class KernelType { kBF16, kFP16, kFP32 };
enum class KernelOp { kScale, kMultiply, kAxpy };
enum class KernelActivation { kIdentity, kGeluTanh };

// dst = alpha * a | a * b | dst + alpha * a, over numel elements; launch.vector_width > 1 only
// when every operand is 16-byte aligned.
cudaError_t launch_elementwise(KernelOp op, KernelType type, void* dst, const void* a, const void* b,
                               std::int64_t numel, float alpha, const ElementwiseLaunch& launch, cudaStream_t stream);

// One tensor of a multi-tensor Adam step.
struct AdamTensor {
  void* params = nullptr;
  const void* grads = nullptr;
  float* master = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  std::int64_t numel = 0;
};
struct AdamHyperparameters {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float correction1 = 1.0f, correction2 = 1.0f;  // 1 - beta^step, computed on the host in fp64
};
// One launch per entry of `plan` (plan_adam_chunks over the tensors' numels with `limits`).
cudaError_t launch_multi_tensor_adam(KernelType param_type, const std::vector<AdamTensor>& tensors,
                                     const std::vector<AdamLaunch>& plan, const AdamChunkLimits& limits,
                                     const AdamHyperparameters& hyper, cudaStream_t stream);

// dst = act(x + bias[col]) + residual; bias / residual may be null.
cudaError_t launch_bias_activation(KernelType type, KernelActivation act, void* dst, const void* x, const void* bias,
                                   const void* residual, std::int64_t rows, std::int64_t cols,
                                   const ElementwiseLaunch& launch, cudaStream_t stream);
// dx = dy * act'(x + bias[col]); bias may be null.
cudaError_t launch_bias_activation_backward(KernelType type, KernelActivation act, void* dx, const void* dy,
                                            const void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                                            const ElementwiseLaunch& launch, cudaStream_t stream);
cudaError_t launch_layer_norm(KernelType type, void* y, const void* x, const void* gamma, const void* beta, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, float eps, const RowLaunch& launch,
                              cudaStream_t stream);
cudaError_t launch_layer_norm_backward(KernelType type, void* dx, void* dgamma, void* dbeta, const void* dy,
                                       const void* x, const void* gamma, const float* mean, const float* rstd,
                                       std::int64_t rows, std::int64_t cols, const RowLaunch& launch, cudaStream_t stream);

}  // namespace prefetchlab::gpu::cuda
