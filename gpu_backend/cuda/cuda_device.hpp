#pragma once
// The CUDA + NCCL device (docs/real-backend.md): one GPU per rank in one process, one
// host thread per GPU (the executor's rank threads).
//   streams   cudaStream_t (non-blocking)
//   events    cudaEvent_t with timing; host waits poll cudaEventQuery so a failed group or a
//             stuck collective ends the wait instead of hanging it
//   memory    core::CachingAllocator on cudaMalloc / cudaFree, stream-use tracked by events
//   collectives  NCCL (ncclCommInitAll over the group's GPUs, or ncclCommInitRank with the id
//             rank 0's store carries when the ranks are processes); a failure aborts every comm
//   kernels   cuBLAS cublasGemmEx / cublasGemmStridedBatchedEx (bf16/fp16/fp32 in, fp32
//             accumulation, cuBLAS's recommended workspace) and the vectorised memory-bound,
//             fused layer and multi-tensor Adam kernels (cuda_kernels.hpp)
// Built only when CMake finds the CUDA toolkit and NCCL (gpu_backend/CMakeLists.txt).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/memory/allocator_options.hpp"
#include "gpu_backend/device/device_group.hpp"

namespace prefetchlab::gpu {

class ProcessLink;

struct CudaDeviceOptions {
  int world_size = 1;  // GPUs 0 .. world_size-1
  // Set: the ranks are processes; this group holds the link's rank only, on GPU LOCAL_RANK, and
  // joins the others with ncclCommInitRank (world_size is the link's).
  ProcessLink* process = nullptr;
  core::AllocatorOptions allocator;
  // A host wait on a collective (or on work behind one) longer than this fails the run.
  std::chrono::milliseconds collective_timeout{60'000};
};

// GPUs cudaGetDeviceCount reports; 0 when there are none or the driver is missing.
int cuda_device_count();

// Throws BackendUnavailable (device/backend_unavailable.hpp) when there are fewer GPUs than ranks.
std::unique_ptr<DeviceGroup> make_cuda_device_group(const CudaDeviceOptions& options);

}  // namespace prefetchlab::gpu
