#pragma once
// The device microbenchmarks `calibrate --backend` fits a hardware profile from
// (docs/real-backend.md): collectives over sizes (nccl-tests' convention), GEMMs of given shapes
// with the backward pair the executor issues for them, a memory-bound pass, an Adam step,
// host<->device copies, the host cost of enqueueing a kernel and a collective, and a GEMM
// overlapped with an all-gather (contention). Never a scenario's model run: only these kernels.
// Every rank runs every benchmark at once on its own thread, as ranks do in training (on the host
// device they share the CPU, which is part of what is measured). When the ranks are processes
// (`--launcher env`), each measures its own and rank 0 combines them all.
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_backend/device/device_group.hpp"

namespace prefetchlab::gpu {

// Runs fn(device) on one thread per local rank; the first exception aborts the group (so no rank
// waits forever in a collective) and is rethrown here as a RunAborted-style runtime_error.
void run_on_ranks(DeviceGroup& group, const std::function<void(Device&)>& fn);

enum class CollectiveOp { kAllGather, kReduceScatter };

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct MicrobenchmarkOptions {
  ElementType type = ElementType::kBF16;
  // nccl-tests' size column: the whole gathered (all_gather) or scattered (reduce_scatter)
  // buffer; each rank sends or receives size / world_size.
  std::vector<std::int64_t> collective_sizes_bytes;
  std::vector<GemmShape> gemm_shapes;
  // One memory-bound pass (read + write of one buffer) per size, each size the bytes read: a
  // GPU reaches steady bandwidth only at large buffers (issue 20: a 2 MiB pass read 537 GB/s on
  // an H200 where a 1 GiB copy moves 4,094), so calibrate measures >= 1 GiB there.
  std::vector<std::int64_t> memory_pass_sizes_bytes{std::int64_t{2} << 20};
  // Beyond a CPU's last-level cache (4M x 16 bytes of fp32 state and bf16 data = 64 MiB), as a
  // real partition is: at 1M a 2-rank host run's Adam was ~2x the microbenchmark's rate.
  std::int64_t adam_numel = 4 << 20;
  // Host <-> device copies, one per size (calibrate uses the scenario's bucket sizes), from a
  // host buffer pinned as DeepSpeed's offload pins it (pageable copies ran at 7-11 GB/s where
  // pinned ones move 55 GB/s on an H200, issue 20).
  std::vector<std::int64_t> copy_sizes_bytes{std::int64_t{16} << 20};
  bool pin_host_buffers = true;
  std::int64_t launch_samples = 200;
  GemmShape contention_gemm{256, 1024, 1024};
  std::int64_t contention_collective_bytes = 8 << 20;
  int warmup = 1;
  int iterations = 5;
};

struct CollectiveTiming {
  std::int64_t bytes = 0;
  std::int64_t count = 0;  // elements per rank (nccl-tests' count column)
  double out_of_place_us = 0;
  double in_place_us = 0;
};

// A forward GEMM Y[m x n] = X[m x k] . W[k x n] and its backward pair as the executor issues
// them (gpu_backend/executor/rank_executor.cpp): dgrad dX = dY . W^T (m x k x n) and wgrad
// dW += X^T . dY (k x n x m, accumulating).
struct GemmTiming {
  GemmShape shape;
  double time_ns = 0;           // the forward GEMM; mean over ranks of each rank's mean
  double backward_time_ns = 0;  // dgrad + wgrad, the same way
};

// Device time of one kernel or copy moving `bytes` (mean over ranks of each rank's median).
struct SizeTiming {
  std::int64_t bytes = 0;
  double time_ns = 0;
};

struct ContentionTiming {
  double gemm_alone_ns = 0, gemm_overlapped_ns = 0;
  double collective_alone_ns = 0, collective_overlapped_ns = 0;
};

struct MicrobenchmarkResults {
  // False on the ranks other than 0 of a job whose ranks are processes: rank 0 holds the results.
  bool has_results = true;
  int world_size = 1;
  int nodes = 1;           // distinct hosts the ranks ran on
  int ranks_per_node = 1;  // the most ranks on one host
  std::vector<CollectiveTiming> all_gather, reduce_scatter;  // empty on one rank
  std::vector<GemmTiming> gemms;
  std::vector<SizeTiming> memory_passes;  // per memory_pass_sizes_bytes: bytes read (written as many)
  double adam_elements_per_s = 0;  // the device's Adam kernel over a bf16/fp32 partition
  std::vector<SizeTiming> host_to_device, device_to_host;  // per copy_sizes_bytes
  double kernel_launch_ns = 0;      // host time to enqueue one small kernel
  double collective_launch_ns = 0;  // host time to enqueue one small all-gather
  ContentionTiming contention;
};

MicrobenchmarkResults run_microbenchmarks(DeviceGroup& group, const MicrobenchmarkOptions& options);

// Their JSON form (a process rank's results travel to rank 0 in it).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CollectiveTiming, bytes, count, out_of_place_us, in_place_us)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SizeTiming, bytes, time_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ContentionTiming, gemm_alone_ns, gemm_overlapped_ns, collective_alone_ns,
                                   collective_overlapped_ns)

}  // namespace prefetchlab::gpu
