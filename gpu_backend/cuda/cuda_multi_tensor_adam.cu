// Multi-tensor Adam (PyTorch's fused Adam / apex's multi_tensor_adam design): each launch gets
// up to 30 tensors' addresses and a block -> (tensor, chunk) table by value in its kernel
// arguments (adam_chunk_plan.hpp), each block updates one chunk, each thread 4 elements per
// step with 128-bit loads of the fp32 states when the chunk is aligned.
#include <cmath>

#include "gpu_backend/cuda/cuda_element.cuh"
#include "gpu_backend/cuda/cuda_kernels.hpp"

namespace prefetchlab::gpu::cuda {
namespace {

constexpr int kMaxTensors = 30;
constexpr int kMaxBlocks = 320;
constexpr int kThreads = 512;  // PyTorch's kBlockSize for multi_tensor_apply
constexpr int kIlp = 4;

struct AdamTable {
  void* params[kMaxTensors];
  const void* grads[kMaxTensors];
  float* master[kMaxTensors];
  float* exp_avg[kMaxTensors];
  float* exp_avg_sq[kMaxTensors];
  std::int64_t numel[kMaxTensors];
  unsigned char block_slot[kMaxBlocks];
  int block_chunk[kMaxBlocks];
};
// CUDA's classic limit on a kernel's arguments is 4 KiB (the table plus the scalars below).
static_assert(sizeof(AdamTable) + 64 <= 4096, "the Adam launch table must fit the kernel argument space");

__device__ __forceinline__ void adam_update(float g, float& p, float& m, float& v, const AdamHyperparameters& h) {
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * g * g;
  p -= h.lr * (m / h.correction1) / (sqrtf(v / h.correction2) + h.eps);
}

bool __device__ __forceinline__ aligned(const void* p, unsigned bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0;
}

template <class T>
__global__ void __launch_bounds__(kThreads) multi_tensor_adam_kernel(AdamTable table, std::int64_t chunk_numel,
                                                                     AdamHyperparameters h) {
  const int slot = table.block_slot[blockIdx.x];
  const std::int64_t begin = static_cast<std::int64_t>(table.block_chunk[blockIdx.x]) * chunk_numel;
  const std::int64_t end = min(begin + chunk_numel, table.numel[slot]);
  T* params = static_cast<T*>(table.params[slot]) + begin;
  const T* grads = static_cast<const T*>(table.grads[slot]) + begin;
  float* master = table.master[slot] + begin;
  float* m = table.exp_avg[slot] + begin;
  float* v = table.exp_avg_sq[slot] + begin;
  const std::int64_t n = end - begin;
  std::int64_t done = 0;
  if (aligned(master, 16) && aligned(m, 16) && aligned(v, 16) && aligned(params, sizeof(T) * kIlp) &&
      aligned(grads, sizeof(T) * kIlp)) {
    const std::int64_t vectors = n / kIlp;
    for (std::int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
      const Vec<T, kIlp> g = reinterpret_cast<const Vec<T, kIlp>*>(grads)[i];
      Vec<float, kIlp> p = reinterpret_cast<Vec<float, kIlp>*>(master)[i];
      Vec<float, kIlp> mm = reinterpret_cast<Vec<float, kIlp>*>(m)[i];
      Vec<float, kIlp> vv = reinterpret_cast<Vec<float, kIlp>*>(v)[i];
      Vec<T, kIlp> out;
#pragma unroll
      for (int j = 0; j < kIlp; ++j) {
        adam_update(to_float(g.v[j]), p.v[j], mm.v[j], vv.v[j], h);
        out.v[j] = from_float<T>(p.v[j]);
      }
      reinterpret_cast<Vec<float, kIlp>*>(master)[i] = p;
      reinterpret_cast<Vec<float, kIlp>*>(m)[i] = mm;
      reinterpret_cast<Vec<float, kIlp>*>(v)[i] = vv;
      reinterpret_cast<Vec<T, kIlp>*>(params)[i] = out;
    }
    done = vectors * kIlp;
  }
  for (std::int64_t i = done + threadIdx.x; i < n; i += blockDim.x) {
    float p = master[i], mm = m[i], vv = v[i];
    adam_update(to_float(grads[i]), p, mm, vv, h);
    master[i] = p;
    m[i] = mm;
    v[i] = vv;
    params[i] = from_float<T>(p);
  }
}

template <class T>
cudaError_t adam_as(const std::vector<AdamTensor>& tensors, const std::vector<AdamLaunch>& plan,
                    const AdamChunkLimits& limits, const AdamHyperparameters& hyper, cudaStream_t stream) {
  if (limits.max_tensors_per_launch > kMaxTensors || limits.max_blocks_per_launch > kMaxBlocks ||
      limits.chunk_numel * (static_cast<std::int64_t>(kMaxBlocks) + 1) > (std::int64_t{1} << 62)) {
    return cudaErrorInvalidValue;
  }
  for (const AdamLaunch& launch : plan) {
    if (launch.tensors.size() > static_cast<std::size_t>(kMaxTensors) ||
        launch.blocks.size() > static_cast<std::size_t>(kMaxBlocks)) {
      return cudaErrorInvalidValue;
    }
    AdamTable table{};
    for (std::size_t s = 0; s < launch.tensors.size(); ++s) {
      const AdamTensor& t = tensors.at(static_cast<std::size_t>(launch.tensors[s]));
      table.params[s] = t.params;
      table.grads[s] = t.grads;
      table.master[s] = t.master;
      table.exp_avg[s] = t.exp_avg;
      table.exp_avg_sq[s] = t.exp_avg_sq;
      table.numel[s] = t.numel;
    }
    for (std::size_t b = 0; b < launch.blocks.size(); ++b) {
      if (launch.blocks[b].chunk > 0x7fffffff) return cudaErrorInvalidValue;
      table.block_slot[b] = static_cast<unsigned char>(launch.blocks[b].slot);
      table.block_chunk[b] = static_cast<int>(launch.blocks[b].chunk);
    }
    multi_tensor_adam_kernel<T><<<static_cast<unsigned>(launch.blocks.size()), kThreads, 0, stream>>>(
        table, limits.chunk_numel, hyper);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launch_multi_tensor_adam(KernelType param_type, const std::vector<AdamTensor>& tensors,
                                     const std::vector<AdamLaunch>& plan, const AdamChunkLimits& limits,
                                     const AdamHyperparameters& hyper, cudaStream_t stream) {
  switch (param_type) {
    case KernelType::kBF16: return adam_as<__nv_bfloat16>(tensors, plan, limits, hyper, stream);
    case KernelType::kFP16: return adam_as<__half>(tensors, plan, limits, hyper, stream);
    case KernelType::kFP32: return adam_as<float>(tensors, plan, limits, hyper, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace prefetchlab::gpu::cuda
