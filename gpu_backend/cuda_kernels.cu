#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "gpu_backend/cuda_kernels.hpp"

namespace prefetchlab::gpu::cuda {
namespace {

template <class T> __device__ float load(const T* p, std::int64_t i);
template <> __device__ float load<float>(const float* p, std::int64_t i) { return p[i]; }
template <> __device__ float load<__nv_bfloat16>(const __nv_bfloat16* p, std::int64_t i) { return __bfloat162float(p[i]); }
template <> __device__ float load<__half>(const __half* p, std::int64_t i) { return __half2float(p[i]); }
template <class T> __device__ void store(T* p, std::int64_t i, float v);
template <> __device__ void store<float>(float* p, std::int64_t i, float v) { p[i] = v; }
template <> __device__ void store<__nv_bfloat16>(__nv_bfloat16* p, std::int64_t i, float v) { p[i] = __float2bfloat16(v); }
template <> __device__ void store<__half>(__half* p, std::int64_t i, float v) { p[i] = __float2half(v); }

template <class T>
__global__ void elementwise_kernel(KernelOp op, T* dst, const T* a, const T* b, std::int64_t numel, float alpha) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    float v = 0;
    switch (op) {
      case KernelOp::kScale: v = alpha * load(a, i); break;
      case KernelOp::kMultiply: v = load(a, i) * load(b, i); break;
      case KernelOp::kAxpy: v = load(dst, i) + alpha * load(a, i); break;
    }
    store(dst, i, v);
  }
}

template <class T>
__global__ void adam_kernel(T* params, const T* grads, float* master, float* m, float* v, std::int64_t numel, float lr,
                            float beta1, float beta2, float eps, float bias1, float bias2) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const float g = load(grads, i);
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    master[i] -= lr * (m[i] / bias1) / (sqrtf(v[i] / bias2) + eps);
    store(params, i, master[i]);
  }
}

constexpr int kThreads = 256;
unsigned blocks_for(std::int64_t numel) {
  const std::int64_t b = (numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class T>
cudaError_t elementwise_as(KernelOp op, void* dst, const void* a, const void* b, std::int64_t numel, float alpha,
                           cudaStream_t stream) {
  elementwise_kernel<T><<<blocks_for(numel), kThreads, 0, stream>>>(op, static_cast<T*>(dst), static_cast<const T*>(a),
                                                                    static_cast<const T*>(b), numel, alpha);
  return cudaGetLastError();
}

template <class T>
cudaError_t adam_as(void* params, const void* grads, float* master, float* m, float* v, std::int64_t numel, float lr,
                    float beta1, float beta2, float eps, std::int64_t step, cudaStream_t stream) {
  const float bias1 = 1 - std::pow(beta1, static_cast<float>(step));
  const float bias2 = 1 - std::pow(beta2, static_cast<float>(step));
  adam_kernel<T><<<blocks_for(numel), kThreads, 0, stream>>>(static_cast<T*>(params), static_cast<const T*>(grads), master,
                                                             m, v, numel, lr, beta1, beta2, eps, bias1, bias2);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_elementwise(KernelOp op, KernelType type, void* dst, const void* a, const void* b,
                               std::int64_t numel, float alpha, cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  switch (type) {
    case KernelType::kBF16: return elementwise_as<__nv_bfloat16>(op, dst, a, b, numel, alpha, stream);
    case KernelType::kFP16: return elementwise_as<__half>(op, dst, a, b, numel, alpha, stream);
    case KernelType::kFP32: return elementwise_as<float>(op, dst, a, b, numel, alpha, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_adam(KernelType param_type, void* params, const void* grads, float* master, float* exp_avg,
                        float* exp_avg_sq, std::int64_t numel, float lr, float beta1, float beta2, float eps,
                        std::int64_t step, cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  switch (param_type) {
    case KernelType::kBF16: return adam_as<__nv_bfloat16>(params, grads, master, exp_avg, exp_avg_sq, numel, lr, beta1, beta2, eps, step, stream);
    case KernelType::kFP16: return adam_as<__half>(params, grads, master, exp_avg, exp_avg_sq, numel, lr, beta1, beta2, eps, step, stream);
    case KernelType::kFP32: return adam_as<float>(params, grads, master, exp_avg, exp_avg_sq, numel, lr, beta1, beta2, eps, step, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace prefetchlab::gpu::cuda
