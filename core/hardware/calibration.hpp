#pragma once
// The tunable numbers of the cost models: how close kernels get to the hardware's peaks, what
// the host pays per kernel, hook and collective, and optional measured collective figures that
// replace the ones derived from link facts. Each default names its public source; a default
// without one is marked as an estimate to calibrate.
//
// Read from a hardware profile's optional `calibration:` section and, key by key over that,
// from a scenario's optional `cluster.calibration:` section (YAML keys carry their units:
//   gemm_efficiency, memory_efficiency, compute_time_scale, copy_time_scale,
//   host_overhead_scale   (fractions)
//   kernel_launch_us, hook_overhead_us, collective_launch_us, collective_latency_us
//   allgather_bus_bandwidth_gb_per_s, reduce_scatter_bus_bandwidth_gb_per_s,
//   all_reduce_bus_bandwidth_gb_per_s                                            (1e9 B/s)
//   contention_compute_factor, contention_collective_factor                      (fractions)
//   contention_model: factors | shared_cores, shared_cores (CPU cores per node),
//   shared_cores_collective_penalty (fraction),
//   collective_model: nccl_tuner | ring,
//   gemm_half_volume_mnk (M*N*K, elements^3),
//   device_adam_elements_per_s (parameters per second; set by calibrate --backend)).
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

struct CalibrationConstants {
  // Fraction of the dense tensor peak a large GEMM reaches (MAMF, stas00/ml-engineering
  // compute/accelerator/README.md). The default here is for a GPU without a published
  // measurement; default_gemm_efficiency() picks the measured one.
  double gemm_efficiency = 0.8;
  // M*N*K at which a GEMM reaches half its plateau rate (the shape-efficiency curve of
  // sim/compute_model.hpp). Unset = the H100 sweep's fit scaled by the profile's SM count; a
  // measured device (calibrate --backend) sets its own, since a CPU or another GPU saturates at
  // very different sizes.
  std::optional<double> gemm_half_volume_mnk;
  // Fraction of peak memory bandwidth a memory-bound kernel reaches: A100 40GB memcpy measured
  // ~1.355 of 1.555 TB/s = 0.87 (PTsolvers/gpu-workshop-JuliaCon23 #7); the only such
  // measurement at hand, used for every GPU until calibrated.
  double memory_efficiency = 0.87;
  // What-if multiplier on every kernel's duration: 0 = free compute, 2 = twice as slow.
  double compute_time_scale = 1.0;
  // What-if multiplier on the buffer copies around collectives (all-gather copy-in/copy-out,
  // gradient bucket copies), on top of compute_time_scale: 0 = copies fused away, as an ideal
  // implementation would; isolates the collectives themselves in studies.
  double copy_time_scale = 1.0;
  // Host cost of one kernel launch from PyTorch eager mode (dispatcher + cudaLaunchKernel).
  // No published figure at hand; 5 us is an estimate to calibrate.
  std::int64_t kernel_launch_ns = 5'000;
  // Host cost of one DeepSpeed module hook (Python: trace bookkeeping, fetch/release logic).
  // Python framework work costs tens of us per call (see collective_launch_ns); 20 us is the
  // low end of that, an estimate to calibrate.
  std::int64_t hook_overhead_ns = 20'000;
  // Host cost of issuing one collective through torch.distributed (Python + NCCL enqueue).
  // Tens of us per call: a small all_gather_into_tensor takes ~110 us end to end
  // (KuangjuX/NVSHMEM-Tutorial #23), of which NCCL's own floor is ~10-30 us (nccl-tests small
  // sizes: 12.5-16.7 us on 8x H20, deepseek-ai/DeepEP #303); 20 us is an estimate.
  std::int64_t collective_launch_ns = 20'000;
  // Measured collective figures; unset = derived from the profile's link facts by the
  // collective cost model. Bus bandwidth is nccl-tests' busbw (its doc/PERFORMANCE.md).
  std::optional<double> allgather_bus_bandwidth_bytes_per_s;
  std::optional<double> reduce_scatter_bus_bandwidth_bytes_per_s;
  std::optional<std::int64_t> collective_latency_ns;
  // An all-reduce's measured busbw (nccl-tests all_reduce_perf); unset = the reduce-scatter and
  // all-gather phases' figures.
  std::optional<double> all_reduce_bus_bandwidth_bytes_per_s;
  // Which collective cost model the simulator uses: NCCL's tuner (protocol and algorithm
  // choice, sim/nccl_tuner_cost_model.hpp) or the plain ring/Simple model (sim/ring_cost_model.hpp).
  enum class CollectiveModel { kNcclTuner, kRing };
  CollectiveModel collective_model = CollectiveModel::kNcclTuner;
  // Contention while a collective and compute kernels run on the same GPU: compute
  // kernels stretch by 1 + contention_compute_factor, the collective by
  // 1 + contention_collective_factor; 0 turns that side off. Defaults: 0.19, the average
  // compute slowdown under overlap measured by Lee et al. (arXiv:2507.03114, A100/H100, 18.9%,
  // max 40%); 0.1 for the collective, an estimate (overlapped with a GEMM, NCCL send/recv took
  // up to 2x longer, NVIDIA/nccl #1433).
  double contention_compute_factor = 0.19;
  double contention_collective_factor = 0.1;
  // How concurrent work on one device shares it. kFactors: the two factors above (a GPU, where
  // NCCL's kernels take SMs and memory bandwidth from compute). kSharedCores: a CPU-backed device
  // (the host-thread device, gpu_backend/host_device.hpp), where each stream's running kernel and
  // each rank's part of a running collective is a thread on the `shared_cores` cores that all
  // ranks of a node share: with n running on c cores, each runs at min(1, c / n) of its speed
  // (processor sharing). The factors are not used then (setting one is an error).
  enum class ContentionModel { kFactors, kSharedCores };
  ContentionModel contention_model = ContentionModel::kFactors;
  int shared_cores = 0;  // kSharedCores only; the loader requires >= 1 then
  // kSharedCores: a collective's extra stretch while its node has more work than cores. Its
  // ranks' parts meet at barriers, so each must wait until all of them hold a core at once
  // (gang scheduling), which fair time-slicing grants less often than its share. Calibrated
  // from the overlapped all-gather microbenchmark; 0 = plain processor sharing.
  double shared_cores_collective_penalty = 0;
  // Multiplier on every host cost above: 0 = free host, 1 = as calibrated.
  double host_overhead_scale = 1.0;
  // CPU Adam throughput per rank with zero.offload_optimizer (DeepSpeed's DeepSpeedCPUAdam on
  // the host cores one GPU process gets): parameters updated per second. No published
  // figure at hand; 1e9/s is an estimate to calibrate.
  double cpu_adam_elements_per_s = 1e9;
  // Measured throughput of the device's own Adam kernel (no offload): parameters updated per
  // second. Unset = the memory-bound model (optimizer_step_ns in sim/compute_model.hpp), right
  // for a GPU; a device whose Adam is compute-bound sets it (calibrate --backend host: a scalar
  // CPU loop with a sqrt and divisions per element, ~4x faster than its 42 bytes at the
  // measured memory-pass rate would allow).
  std::optional<double> device_adam_elements_per_s;
};

// The MAMF fraction measured for the named GPU (stas00/ml-engineering
// compute/accelerator/README.md): A100 SXM 0.869, A100 PCIe 0.811, H100 SXM 0.803 (H200 "the
// same"), GH200 0.838, B200 0.776, B300 0.786, GB200 0.729. Any other GPU: 0.8, an estimate amid
// those measurements, to be calibrated.
double default_gemm_efficiency(std::string_view gpu_model);

// Defaults for a GPU: CalibrationConstants{} with default_gemm_efficiency(gpu_model).
CalibrationConstants default_calibration(std::string_view gpu_model);

// Reads a `calibration:` mapping over `base`: every key present replaces base's value, the rest
// stay. Strict: unknown keys (with the closest suggestion), non-numbers and values out of range
// are InputErrors naming file, line and key. An empty or missing section returns `base`.
CalibrationConstants read_calibration(const YamlSection& section, const CalibrationConstants& base);

}  // namespace prefetchlab::core
