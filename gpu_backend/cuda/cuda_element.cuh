#pragma once
// Device-side loads and stores of the kernels' element types as fp32, and aligned vectors of
// them (one 128-bit access for 8 bf16 / fp16 or 4 fp32 values).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace prefetchlab::gpu::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block (every thread gets it); `shared` holds 32 floats. Blocks of 32 x k threads.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? shared[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const float total = shared[0];
  __syncthreads();  // `shared` may be reused by the next call
  return total;
}

}  // namespace prefetchlab::gpu::cuda
