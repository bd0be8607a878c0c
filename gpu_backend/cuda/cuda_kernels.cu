// The element-wise passes of the CUDA device: grid-stride loops over 16-byte vectors when every
// operand is aligned (launch.vector_width > 1), the tail (numel % width) one element per thread.
#include "gpu_backend/cuda/cuda_element.cuh"
#include "gpu_backend/cuda/cuda_kernels.hpp"

namespace prefetchlab::gpu::cuda {
namespace {

template <KernelOp Op>
__device__ __forceinline__ float apply(float d, float a, float b, float alpha) {
  if constexpr (Op == KernelOp::kScale) return alpha * a;
  if constexpr (Op == KernelOp::kMultiply) return a * b;
  return d + alpha * a;  // kAxpy
}

template <class T, int N, KernelOp Op>
__global__ void elementwise_kernel(T* dst, const T* a, const T* b, std::int64_t numel, float alpha) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t vectors = numel / N;
  for (std::int64_t i = first; i < vectors; i += stride) {
    Vec<T, N> va{}, vb{}, vd{};
    if constexpr (Op != KernelOp::kMultiply) va = reinterpret_cast<const Vec<T, N>*>(a)[i];
    if constexpr (Op == KernelOp::kMultiply) {
      va = reinterpret_cast<const Vec<T, N>*>(a)[i];
      vb = reinterpret_cast<const Vec<T, N>*>(b)[i];
    }
    if constexpr (Op == KernelOp::kAxpy) vd = reinterpret_cast<const Vec<T, N>*>(dst)[i];
    Vec<T, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      out.v[j] = from_float<T>(apply<Op>(to_float(vd.v[j]), to_float(va.v[j]), to_float(vb.v[j]), alpha));
    }
    reinterpret_cast<Vec<T, N>*>(dst)[i] = out;
  }
  for (std::int64_t i = vectors * N + first; i < numel; i += stride) {
    const float d = Op == KernelOp::kAxpy ? to_float(dst[i]) : 0.0f;
    const float vb = Op == KernelOp::kMultiply ? to_float(b[i]) : 0.0f;
    dst[i] = from_float<T>(apply<Op>(d, to_float(a[i]), vb, alpha));
  }
}

template <class T, KernelOp Op>
cudaError_t elementwise_op(void* dst, const void* a, const void* b, std::int64_t numel, float alpha,
                           const ElementwiseLaunch& launch, cudaStream_t stream) {
  constexpr int kWide = static_cast<int>(kVectorBytes / sizeof(T));
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  if (launch.vector_width == kWide) {
    elementwise_kernel<T, kWide, Op><<<launch.blocks, launch.threads, 0, stream>>>(d, x, y, numel, alpha);
  } else if (launch.vector_width == 1) {
    elementwise_kernel<T, 1, Op><<<launch.blocks, launch.threads, 0, stream>>>(d, x, y, numel, alpha);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t elementwise_as(KernelOp op, void* dst, const void* a, const void* b, std::int64_t numel, float alpha,
                           const ElementwiseLaunch& launch, cudaStream_t stream) {
  switch (op) {
    case KernelOp::kScale: return elementwise_op<T, KernelOp::kScale>(dst, a, b, numel, alpha, launch, stream);
    case KernelOp::kMultiply: return elementwise_op<T, KernelOp::kMultiply>(dst, a, b, numel, alpha, launch, stream);
    case KernelOp::kAxpy: return elementwise_op<T, KernelOp::kAxpy>(dst, a, b, numel, alpha, launch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_elementwise(KernelOp op, KernelType type, void* dst, const void* a, const void* b,
                               std::int64_t numel, float alpha, const ElementwiseLaunch& launch, cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  switch (type) {
    case KernelType::kBF16: return elementwise_as<__nv_bfloat16>(op, dst, a, b, numel, alpha, launch, stream);
    case KernelType::kFP16: return elementwise_as<__half>(op, dst, a, b, numel, alpha, launch, stream);
    case KernelType::kFP32: return elementwise_as<float>(op, dst, a, b, numel, alpha, launch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace prefetchlab::gpu::cuda
