// A transformer layer's fused memory-bound kernels on the CUDA device: bias + activation
// (+ residual) in one pass and its backward, LayerNorm forward (one block per row, two-pass
// mean and variance in fp32, mean and rstd saved) and backward (dx one block per row; dgamma
// and dbeta column sums by blocks of 32 columns, deterministic: no atomics).
#include "gpu_backend/cuda/cuda_element.cuh"
#include "gpu_backend/cuda/cuda_kernels.hpp"

namespace prefetchlab::gpu::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // as fused_kernel_checks.hpp
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float activate(KernelActivation act, float x) {
  if (act == KernelActivation::kIdentity) return x;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
}
__device__ __forceinline__ float activate_derivative(KernelActivation act, float x) {
  if (act == KernelActivation::kIdentity) return 1.0f;
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

// Vectors of N elements never straddle a row: the host picks N > 1 only when cols % N == 0.
template <class T, int N>
__global__ void bias_activation_kernel(KernelActivation act, T* dst, const T* x, const T* bias, const T* residual,
                                       std::int64_t numel, std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel / N; i += stride) {
    const Vec<T, N> vx = reinterpret_cast<const Vec<T, N>*>(x)[i];
    Vec<T, N> vb{}, vr{};
    if (bias) vb = reinterpret_cast<const Vec<T, N>*>(bias)[(i * N % cols) / N];
    if (residual) vr = reinterpret_cast<const Vec<T, N>*>(residual)[i];
    Vec<T, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      float v = activate(act, to_float(vx.v[j]) + (bias ? to_float(vb.v[j]) : 0.0f));
      if (residual) v += to_float(vr.v[j]);
      out.v[j] = from_float<T>(v);
    }
    reinterpret_cast<Vec<T, N>*>(dst)[i] = out;
  }
}

template <class T, int N>
__global__ void bias_activation_backward_kernel(KernelActivation act, T* dx, const T* dy, const T* x, const T* bias,
                                                std::int64_t numel, std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel / N; i += stride) {
    const Vec<T, N> vx = reinterpret_cast<const Vec<T, N>*>(x)[i];
    const Vec<T, N> vdy = reinterpret_cast<const Vec<T, N>*>(dy)[i];
    Vec<T, N> vb{};
    if (bias) vb = reinterpret_cast<const Vec<T, N>*>(bias)[(i * N % cols) / N];
    Vec<T, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float pre = to_float(vx.v[j]) + (bias ? to_float(vb.v[j]) : 0.0f);
      out.v[j] = from_float<T>(to_float(vdy.v[j]) * activate_derivative(act, pre));
    }
    reinterpret_cast<Vec<T, N>*>(dx)[i] = out;
  }
}

template <class T>
__global__ void layer_norm_kernel(T* y, const T* x, const T* gamma, const T* beta, float* mean_out, float* rstd_out,
                                  std::int64_t cols, float eps) {
  __shared__ float shared[32];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += to_float(x[row + c]);
  const float mean = block_sum(sum, shared) / static_cast<float>(cols);
  float squares = 0.0f;  // second pass over the row (in L1/L2): no cancellation
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_float(x[row + c]) - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(block_sum(squares, shared) / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) {
    mean_out[blockIdx.x] = mean;
    rstd_out[blockIdx.x] = rstd;
  }
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (to_float(x[row + c]) - mean) * rstd;
    y[row + c] = from_float<T>(xhat * to_float(gamma[c]) + to_float(beta[c]));
  }
}

template <class T>
__global__ void layer_norm_dx_kernel(T* dx, const T* dy, const T* x, const T* gamma, const float* mean_in,
                                     const float* rstd_in, std::int64_t cols) {
  __shared__ float shared[32];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * cols;
  const float mean = mean_in[blockIdx.x], rstd = rstd_in[blockIdx.x];
  float sum_g = 0.0f, sum_g_xhat = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_float(dy[row + c]) * to_float(gamma[c]);
    sum_g += g;
    sum_g_xhat += g * (to_float(x[row + c]) - mean) * rstd;
  }
  const float mean_g = block_sum(sum_g, shared) / static_cast<float>(cols);
  const float mean_g_xhat = block_sum(sum_g_xhat, shared) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (to_float(x[row + c]) - mean) * rstd;
    const float g = to_float(dy[row + c]) * to_float(gamma[c]);
    dx[row + c] = from_float<T>(rstd * (g - mean_g - xhat * mean_g_xhat));
  }
}

// Block (32 columns x kColumnSumRows): thread (tx, ty) sums rows ty, ty + kColumnSumRows, ...
// of column blockIdx.x * 32 + tx (coalesced across tx), then the block adds its partial sums.
template <class T>
__global__ void layer_norm_dgamma_kernel(T* dgamma, T* dbeta, const T* dy, const T* x, const float* mean_in,
                                         const float* rstd_in, std::int64_t rows, std::int64_t cols) {
  __shared__ float partial_gamma[kColumnSumRows][33];
  __shared__ float partial_beta[kColumnSumRows][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float dg = 0.0f, db = 0.0f;
  if (c < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += blockDim.y) {
      const float d = to_float(dy[r * cols + c]);
      dg += d * (to_float(x[r * cols + c]) - mean_in[r]) * rstd_in[r];
      db += d;
    }
  }
  partial_gamma[threadIdx.y][threadIdx.x] = dg;
  partial_beta[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total_gamma = 0.0f, total_beta = 0.0f;
    for (unsigned r = 0; r < blockDim.y; ++r) {
      total_gamma += partial_gamma[r][threadIdx.x];
      total_beta += partial_beta[r][threadIdx.x];
    }
    dgamma[c] = from_float<T>(total_gamma);
    dbeta[c] = from_float<T>(total_beta);
  }
}

template <class T>
cudaError_t bias_activation_as(KernelActivation act, void* dst, const void* x, const void* bias, const void* residual,
                               std::int64_t rows, std::int64_t cols, const ElementwiseLaunch& launch, cudaStream_t stream) {
  constexpr int kWide = static_cast<int>(kVectorBytes / sizeof(T));
  auto* out = static_cast<T*>(dst);
  const auto* in = static_cast<const T*>(x);
  const auto* b = static_cast<const T*>(bias);
  const auto* r = static_cast<const T*>(residual);
  if (launch.vector_width == kWide && cols % kWide == 0) {
    bias_activation_kernel<T, kWide><<<launch.blocks, launch.threads, 0, stream>>>(act, out, in, b, r, rows * cols, cols);
  } else {
    bias_activation_kernel<T, 1><<<launch.blocks, launch.threads, 0, stream>>>(act, out, in, b, r, rows * cols, cols);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t bias_activation_backward_as(KernelActivation act, void* dx, const void* dy, const void* x, const void* bias,
                                        std::int64_t rows, std::int64_t cols, const ElementwiseLaunch& launch,
                                        cudaStream_t stream) {
  constexpr int kWide = static_cast<int>(kVectorBytes / sizeof(T));
  auto* out = static_cast<T*>(dx);
  const auto* g = static_cast<const T*>(dy);
  const auto* in = static_cast<const T*>(x);
  const auto* b = static_cast<const T*>(bias);
  if (launch.vector_width == kWide && cols % kWide == 0) {
    bias_activation_backward_kernel<T, kWide><<<launch.blocks, launch.threads, 0, stream>>>(act, out, g, in, b, rows * cols, cols);
  } else {
    bias_activation_backward_kernel<T, 1><<<launch.blocks, launch.threads, 0, stream>>>(act, out, g, in, b, rows * cols, cols);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t layer_norm_as(void* y, const void* x, const void* gamma, const void* beta, float* mean, float* rstd,
                          std::int64_t cols, float eps, const RowLaunch& launch, cudaStream_t stream) {
  layer_norm_kernel<T><<<launch.blocks, launch.threads, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(x),
                                                                     static_cast<const T*>(gamma), static_cast<const T*>(beta),
                                                                     mean, rstd, cols, eps);
  return cudaGetLastError();
}

template <class T>
cudaError_t layer_norm_backward_as(void* dx, void* dgamma, void* dbeta, const void* dy, const void* x, const void* gamma,
                                   const float* mean, const float* rstd, std::int64_t rows, std::int64_t cols,
                                   const RowLaunch& launch, cudaStream_t stream) {
  layer_norm_dx_kernel<T><<<launch.blocks, launch.threads, 0, stream>>>(static_cast<T*>(dx), static_cast<const T*>(dy),
                                                                        static_cast<const T*>(x), static_cast<const T*>(gamma),
                                                                        mean, rstd, cols);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  layer_norm_dgamma_kernel<T><<<column_sum_blocks(cols), dim3(32, kColumnSumRows), 0, stream>>>(
      static_cast<T*>(dgamma), static_cast<T*>(dbeta), static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd,
      rows, cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_bias_activation(KernelType type, KernelActivation act, void* dst, const void* x, const void* bias,
                                   const void* residual, std::int64_t rows, std::int64_t cols,
                                   const ElementwiseLaunch& launch, cudaStream_t stream) {
  switch (type) {
    case KernelType::kBF16: return bias_activation_as<__nv_bfloat16>(act, dst, x, bias, residual, rows, cols, launch, stream);
    case KernelType::kFP16: return bias_activation_as<__half>(act, dst, x, bias, residual, rows, cols, launch, stream);
    case KernelType::kFP32: return bias_activation_as<float>(act, dst, x, bias, residual, rows, cols, launch, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_bias_activation_backward(KernelType type, KernelActivation act, void* dx, const void* dy,
                                            const void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                                            const ElementwiseLaunch& launch, cudaStream_t stream) {
  switch (type) {
    case KernelType::kBF16: return bias_activation_backward_as<__nv_bfloat16>(act, dx, dy, x, bias, rows, cols, launch, stream);
    case KernelType::kFP16: return bias_activation_backward_as<__half>(act, dx, dy, x, bias, rows, cols, launch, stream);
    case KernelType::kFP32: return bias_activation_backward_as<float>(act, dx, dy, x, bias, rows, cols, launch, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_layer_norm(KernelType type, void* y, const void* x, const void* gamma, const void* beta, float* mean,
                              float* rstd, std::int64_t, std::int64_t cols, float eps, const RowLaunch& launch,
                              cudaStream_t stream) {
  switch (type) {
    case KernelType::kBF16: return layer_norm_as<__nv_bfloat16>(y, x, gamma, beta, mean, rstd, cols, eps, launch, stream);
    case KernelType::kFP16: return layer_norm_as<__half>(y, x, gamma, beta, mean, rstd, cols, eps, launch, stream);
    case KernelType::kFP32: return layer_norm_as<float>(y, x, gamma, beta, mean, rstd, cols, eps, launch, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_layer_norm_backward(KernelType type, void* dx, void* dgamma, void* dbeta, const void* dy,
                                       const void* x, const void* gamma, const float* mean, const float* rstd,
                                       std::int64_t rows, std::int64_t cols, const RowLaunch& launch, cudaStream_t stream) {
  switch (type) {
    case KernelType::kBF16:
      return layer_norm_backward_as<__nv_bfloat16>(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols, launch, stream);
    case KernelType::kFP16:
      return layer_norm_backward_as<__half>(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols, launch, stream);
    case KernelType::kFP32:
      return layer_norm_backward_as<float>(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols, launch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace prefetchlab::gpu::cuda
