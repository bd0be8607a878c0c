#pragma once
// The tunable numbers of the cost models: how close kernels get to the hardware's peaks, what
// the host pays per kernel, hook and collective, and optional measured collective figures that
// replace the ones derived from link facts. Each default names its public source; a default
// without one is marked as an estimate to calibrate.
//
// Read from a hardware profile's optional `calibration:` section and, key by key over that,
// from a scenario's optional `cluster.calibration:` section (YAML keys carry their units:
//   gemm_efficiency, memory_efficiency, compute_time_scale, copy_time_scale,
//   sustained_clock_fraction, attention_efficiency, attention_backward_efficiency,
//   attention_flash3_efficiency, attention_flash3_backward_efficiency             (fractions)
//   host_speed (a multiplier, or inf for a free host)
//   gemm_backward_rate_ratio (a fraction of the forward GEMMs' rate)
//   kernel_launch_us, forward_op_host_us, backward_op_host_us, collective_latency_us, and the
//   DeepSpeed host terms host_*_us listed
//   with their fields below                                                       (microseconds)
//   allgather_bus_bandwidth_gb_per_s, reduce_scatter_bus_bandwidth_gb_per_s,
//   all_reduce_bus_bandwidth_gb_per_s                                            (1e9 B/s)
//   measured_collectives (per-size times from nccl-tests logs; measured_collective_curve.hpp)
//   contention_compute_factor, contention_collective_factor                      (fractions)
//   contention_model: factors | shared_cores, shared_cores (CPU cores per node),
//   shared_cores_collective_penalty (fraction),
//   collective_model: nccl_tuner | ring,
//   gemm_half_volume_mnk (M*N*K, elements^3),
//   device_adam_elements_per_s (parameters per second; set by calibrate --backend)).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/hardware/measured_collective_curve.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// The plausible host_speed range (a multiplier of a GPU server's host): a profile outside it is
// refused where it is read, and calibrate --from-host-costs refuses measurements implying one.
inline constexpr double kMinHostSpeed = 1e-3;
inline constexpr double kMaxHostSpeed = 1e3;

struct CalibrationConstants {
  // Fraction of the dense tensor peak a large GEMM reaches (MAMF, stas00/ml-engineering
  // compute/accelerator/README.md). The default here is for a GPU without a published
  // measurement; default_gemm_efficiency() picks the measured one.
  double gemm_efficiency = 0.8;
  // M*N*K at which a GEMM reaches half its plateau rate (the shape-efficiency curve of
  // sim/cost/compute_model.hpp). Unset = the H100 sweep's fit scaled by the profile's SM count; a
  // measured device (calibrate --backend) sets its own, since a CPU or another GPU saturates at
  // very different sizes.
  std::optional<double> gemm_half_volume_mnk;
  // Fraction of peak memory bandwidth a memory-bound kernel reaches: A100 40GB memcpy measured
  // ~1.355 of 1.555 TB/s = 0.87 (PTsolvers/gpu-workshop-JuliaCon23 #7); the only such
  // measurement at hand, used for every GPU until calibrated.
  double memory_efficiency = 0.87;
  // Fraction of the dense tensor peak a fused attention kernel reaches at long sequences
  // (FlashAttention-2: what torch's sdpa runs for 16-bit inputs, and the flash-attn package),
  // forward and backward; shorter sequences reach less (sim/cost/compute_model.hpp).
  // default_attention_efficiency() picks the measured one for the GPU.
  double attention_efficiency = 0.5;
  double attention_backward_efficiency = 0.45;
  // The same for FlashAttention-3 (attention: flash3); 0 = none measured, and flash3 is refused:
  // it is written for Hopper (sm90). default_calibration() sets Hopper's.
  double attention_flash3_efficiency = 0;
  double attention_flash3_backward_efficiency = 0;
  // Fraction of its short-benchmark compute rates (the MAMF and FlashAttention figures above) a
  // GPU sustains under continuous training load, where the board reaches its power limit and
  // lowers its SM clock. The rates above are bursts: mamf-finder reports the fastest of 100
  // timed iterations, and one H200 at 700 W ran the same tool's best GEMM at 841.9 TFLOPS and
  // 1980 MHz in a burst but at 708.5 TFLOPS and ~1465 MHz sustained (0.842); a B200 1770.9 against
  // 1456.3 (0.822) (stas00/ml-engineering compute/accelerator/README.md, branch fast-mamf at
  // 082816f: MAMF against MSMF). default_calibration() sets it for those GPUs; elsewhere 1, an
  // estimate (A100's boost clock is its spec clock). Memory-bound kernels are not scaled. A
  // short layer benchmark runs at burst clocks: set 1 to compare with one.
  double sustained_clock_fraction = 1.0;
  // Backward GEMMs (data and weight gradients: the forward's M*N*K with transposed operands)
  // run at this fraction of the forward GEMMs' rate. Fitted to one H200 (PyTorch 2.11, cuBLAS,
  // bf16): a Llama-2-7B layer at batch 1 x 4096 tokens spends 6.72 ms in backward against
  // 3.07 in forward, which this model matched with backward GEMMs at 0.853 of the forward's rate
  // (attention at cuDNN's, as that PyTorch ran it: tests/sim/kernel_costs_test.cpp); with tile
  // and wave quantization since, forward + backward is within 1.4% of both measured layers. One
  // GPU's fit: listed as uncalibrated until measured.
  double gemm_backward_rate_ratio = 0.853;
  // Device idle time between two back-to-back kernels of one stream when the host is ahead
  // (the next kernel's launch after the previous one retires). NVIDIA's CUDA Graphs post
  // (developer.nvidia.com/blog/cuda-graphs, 2019) measured a ~2.9 us kernel taking 3.8 us per
  // kernel when launched back to back in a stream: ~1 us per kernel.
  std::int64_t kernel_gap_ns = 1'000;
  // What-if multiplier on every kernel's duration: 0 = free compute, 2 = twice as slow.
  double compute_time_scale = 1.0;
  // What-if multiplier on the buffer copies around collectives (all-gather copy-in/copy-out,
  // gradient bucket copies), on top of compute_time_scale: 0 = copies fused away, as an ideal
  // implementation would; isolates the collectives themselves in studies.
  double copy_time_scale = 1.0;
  // ---- Host costs: what each rank's host thread pays (sim/cost/host_cost_model.hpp charges them) ----
  //
  // How fast this machine runs the host code, relative to the GPU servers the defaults below
  // describe: every host cost (kernel_launch_ns and the host_* terms) is charged as its value
  // divided by host_speed. 1 = a GPU server; the machine the DeepSpeed recordings below ran on
  // fits 0.369 (a loaded 2-core VM: 115 us of a GPU server's anchor against the 312 us it
  // recorded); inf = a free host (a what-if). calibrate --backend writes 1 and measured costs.
  double host_speed = 1.0;
  // Host cost of one kernel launch from code that is already in C++ or a tight Python call
  // (dispatcher + cudaLaunchKernel): DeepSpeed's own buffer copies, the optimizer's launches.
  // ~3 us for cuLaunchKernel alone (meta-pytorch/tritonbench PR #1017, GB200); 5 us is an
  // estimate to calibrate.
  std::int64_t kernel_launch_ns = 5'000;
  // Host time per kernel of a model's own eager PyTorch work: forward through nn.Module calls,
  // Python, the dispatcher, autograd's graph recording and the launch; backward through the
  // autograd engine's nodes. Measured on one H200 server (PyTorch 2.11, bf16, eager): GPT-2-small
  // and BERT-base layers are host-bound and take 35-40 us per forward kernel and 54-77 us per
  // backward kernel (as this model counts kernels, core/model/module_costs.hpp); the geometric
  // means are used. For scale: a bare scalar op costs ~2-7 us from Python (pytorch/pytorch
  // issue #41383), before modules, autograd and launches. Machine-dependent: calibrate it.
  std::int64_t forward_op_host_ns = 38'000;
  std::int64_t backward_op_host_ns = 68'000;
  // DeepSpeed ZeRO-3's Python host path, term by term, in ns at host_speed 1. Where each falls
  // in DeepSpeed's code (deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py: the
  // module hooks; partitioned_param_coordinator.py: fetch_sub_module, __all_gather_params,
  // release_sub_module; partition_parameters.py: all_gather_coalesced, partition; stage3.py:
  // the gradient reduce and the step) is said at each term.
  //
  // Structure and relative sizes: fitted to recordings of DeepSpeed 0.19.6 and 0.14.5 ZeRO-3
  // (deepspeedai/DeepSpeed) on a 2-rank CPU run (GPT-2-small shapes, fp32, gloo; prefetch
  // bucket 5e7 / 0 / 1e6, max reuse distance 1e9 / 0 / 0; steady iterations 2-3 of 4, both
  // ranks, the profiled iteration left out). Each call's own time is its recorded host time
  // minus the calls nested in it (a hook minus its fetch or release; a fetch minus its
  // all_gather_coalesced calls and its time blocked in handle.wait()). Hooks: medians; fetch
  // and release: median (least-absolute-deviation) regressions on the call's counts. Spreads
  // below are p10-p90 at the recording machine's speed.
  //
  // Absolute level: the reference is one all_gather_coalesced of a single parameter, which does
  // a buffer torch.empty, one torch-level collective call and a handle (partition_parameters.py,
  // the len(params) == 1 branch): 312 us median recorded (p10-p90 135-5133, n 256, prefetch
  // path). On GPU servers a torch-level collective call that allocates or copies its output
  // costs ~110-130 us, flat across small sizes (framework cost, not wire time): 118.6 us per
  // torch.distributed.all_gather (list form) on 8 NVLink GPUs, issued back to back
  // (KuangjuX/NVSHMEM-Tutorial issue #23); 131 us per all_gather and 122 us per reduce_scatter
  // of CPU time in a torch 2.4 profile (pytorch/pytorch issue #138773). The reference is set to
  // 115 us and every recorded term scaled by the same 115 / 312 = 0.369 (rounded to 0.1 us). An
  // assumption: if DeepSpeed's wrapper came on top of such a call, every default would be ~20%
  // higher. Hosts differ by 2-3x: one 8x H100 server ran an all_reduce and a barrier, each
  // waited for, in 116.5 us together (IBM/pytorch-communication-benchmarks issue #1), so under
  // ~40 us per call there (bench/fidelity lists it as a known gap): calibrate host_speed.
  //
  // A CPU artefact the terms carry: on the recording machine the modules' compute ran on the
  // same 2 cores, and host code right after a module with a large GEMM or lookup (Linear,
  // Embedding) runs slower although DeepSpeed executes the same code for every module (post
  // hook of a Linear 83 us, of a LayerNorm 20 us; a release that keeps a Linear's weight 90-105
  // us, a LayerNorm's 25-35 us). The post hooks and the freed-parameter term include it (their
  // medians must match the recordings); on a GPU server, where that compute runs on the device,
  // they may be ~15-25 us too high per such module.
  //
  // Not terms (left out as too small or as not DeepSpeed's host path on a GPU server):
  // handle.wait() on a completed handle (7.7 us recorded, ~2.8 us here); the prefetch scan's
  // walk of the parameter queue (2.0 us per entry recorded, at most one trace length per
  // iteration; folded into host_fetch_call_ns); the one-time walk of the trace when
  // __params_to_release's lru_cache misses (first complete iteration only); the CPU free of a
  // released parameter's buffer (12.7 us per million elements recorded; a GPU's caching
  // allocator makes a free bookkeeping); the root module's reset_step.
  //
  // Module hooks: DeepSpeed's pre_/post_sub_module_{forward,backward}_function without the
  // fetch or release inside them (trace prologue/epilogue, module stacks, memory logging).
  // Recorded medians 30.9 (p10-p90 15.0-84.0) / 48.1 (13.9-112.7) / 26.5 (12.3-87.5) /
  // 39.1 (12.5-86.4) us.
  std::int64_t host_pre_forward_hook_ns = 11'400;
  std::int64_t host_post_forward_hook_ns = 17'700;
  std::int64_t host_pre_backward_hook_ns = 9'800;
  std::int64_t host_post_backward_hook_ns = 14'400;
  // Setting up a module's backward hooks in its forward: the autograd Functions DeepSpeed applies
  // to the module's inputs (PostBackwardFunctionModule) and outputs (PreBackwardFunctionForModule)
  // so that its backward hooks fire. Not in the recordings' hook rows; from the profiled
  // iteration's trace: medians 18.0 + 30.0 us per module forward.
  std::int64_t host_backward_hook_setup_ns = 17'700;
  // fetch_sub_module's own bookkeeping, excluding the all_gather_coalesced calls and any time
  // blocked: per call (26.3 us recorded: the params set, step counter, queue consumption and
  // prefetch scan), per parameter of the module (6.3 us: the numel sum, active-module sets, the
  // wait loop's check), per in-flight parameter waited on (82.0 us: the registry pop, the
  // fetch-event queue, the stream context and the event record; the wait's blocking is
  // simulated) and per __all_gather_params round it issues, on demand or as a prefetch (161.3
  // us: the round's parameter lists, profiler events and registry inserts; its
  // all_gather_coalesced calls are charged below). One median regression over 5997 fetches;
  // residual p10/p90 -34/+74 us, the fitted terms' 90% bootstrap intervals within +-7%.
  std::int64_t host_fetch_call_ns = 9'700;
  std::int64_t host_fetch_per_param_ns = 2'300;
  std::int64_t host_fetch_per_inflight_param_ns = 30'200;
  std::int64_t host_fetch_gather_round_ns = 59'500;
  // One all_gather_coalesced call (the anchor above: call + one parameter = 115 us) and each
  // parameter in it (flattening, partition bookkeeping: 20 us recorded, the slope of the
  // profiled calls' non-copy host time over 2 to 29 parameters; the copy-in itself is device work).
  std::int64_t host_allgather_call_ns = 107'600;
  std::int64_t host_allgather_per_param_ns = 7'400;
  // release_sub_module: per call (26.8 us recorded), per parameter of the module (3.7 us: the
  // active-module discard and the release check) and per parameter actually partitioned (169.6
  // us: partition()'s Python - _partition_param, free_param's record_stream and empty-tensor
  // swap, status and count updates - plus the CPU artefact above). Median regression over 5892
  // releases (the tied 38.6M-element embedding's 32 frees, a 154 MB CPU munmap, left out) with a
  // per-freed-element and a trace-walk term beside, both then dropped (see above).
  std::int64_t host_release_call_ns = 9'900;
  std::int64_t host_release_per_param_ns = 1'400;
  std::int64_t host_release_per_freed_param_ns = 62'500;
  // Gradient reduce-scatter (stage3.py __reduce_and_partition_ipg_grads with
  // coalesced_collectives.py reduce_scatter_coalesced): one torch-level collective call (the
  // anchor, 115 us) per bucket, and per parameter in the bucket the slicing and partition
  // bookkeeping around it (25.7 us recorded: 3.8 ms of small host ops for a 148-parameter
  // bucket, from the profiled iteration's trace; per call and per parameter cannot be told apart
  // there: one bucket per iteration).
  std::int64_t host_reduce_scatter_call_ns = 115'000;
  std::int64_t host_reduce_scatter_per_param_ns = 9'500;
  // One torch.distributed.all_reduce call: in place, so no output tensor to allocate. In the
  // same torch 2.4 profile as the anchor's sources it took 89 us of CPU time against the
  // reduce_scatter's 122 (pytorch/pytorch issue #138773); that ratio, 0.73, on the 115 us anchor.
  // DeepSpeed's ZeRO-3 step issues all_reduces (the gradient norm, stage3.py); their host time
  // is inside host_optimizer_step_per_param_ns's fit, so the simulated step does not add this.
  std::int64_t host_all_reduce_call_ns = 84'000;
  // The optimizer step's host part per parameter (stage3.py step: norms, unscale, flatten, copy
  // back, release_and_reset_all and the persistent re-gather's bookkeeping; about 12 small ops
  // per parameter): 43.9 us recorded (6.5 ms for 148 parameters with the AdamW math and idle gaps
  // removed, from the profiled iteration's trace; bounds 24-295 us). The update's kernel and the
  // re-gather's collective call are charged on their own.
  std::int64_t host_optimizer_step_per_param_ns = 16'200;
  // Measured collective figures; unset = derived from the profile's link facts by the
  // collective cost model. Bus bandwidth is nccl-tests' busbw (its doc/PERFORMANCE.md).
  std::optional<double> allgather_bus_bandwidth_bytes_per_s;
  std::optional<double> reduce_scatter_bus_bandwidth_bytes_per_s;
  std::optional<std::int64_t> collective_latency_ns;
  // An all-reduce's measured busbw (nccl-tests all_reduce_perf); unset = the reduce-scatter and
  // all-gather phases' figures.
  std::optional<double> all_reduce_bus_bandwidth_bytes_per_s;
  // Measured time-against-size curves (calibrate --from-nccl-tests saves one per log): a
  // collective of a curve's op and group takes the curve's time instead of the model's
  // (core/hardware/measured_collective_curve.hpp). YAML key measured_collectives.
  std::vector<MeasuredCollectiveCurve> measured_collectives;
  // Which collective cost model the simulator uses: NCCL's tuner (protocol and algorithm
  // choice, sim/cost/nccl_tuner_cost_model.hpp) or the plain ring/Simple model (sim/cost/ring_cost_model.hpp).
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
  // (the host-thread device, gpu_backend/host/host_device.hpp), where each stream's running kernel and
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
  // CPU Adam throughput of one node with zero.offload_optimizer: parameters updated per second
  // by DeepSpeedCPUAdam over all of the node's cores. The node's ranks step at the same time on
  // the same cores and memory (csrc/adam/cpu_adam_impl.cpp: an OpenMP loop that loads gradient,
  // parameter and both moments and stores three of them, 28 bytes of host DRAM per parameter),
  // so each rank's step takes its shard times the node's ranks over this rate. 3.9e9/s: CPU-Adam
  // stepped 10B parameters in 2.57 s (1B: 0.22 s) on two 24-core Xeon Platinum 8168 (Ren et al.,
  // "ZeRO-Offload", USENIX ATC 2021, Tables 2 and 4). Slower hosts and older DeepSpeed measure
  // less: 11.6B in 8.2 s (1.4e9/s, deepspeedai/DeepSpeed PR #735); over 4 s for Llama-2-7B on 4
  // A100 (DeepSpeed blogs/deepspeed-zenflow); and DeepSpeed before 0.15.4 copied each fp32
  // gradient down with a blocking cross-device upcast (PR #6962: a 3B backward 25.6 s -> 0.31 s),
  // which is not modelled. Host-dependent (cores, AVX width, DRAM channels, OMP_NUM_THREADS,
  // --bind_cores_to_rank): calibrate it.
  double cpu_adam_node_elements_per_s = 3.9e9;
  // Measured throughput of the device's own Adam kernel (no offload): parameters updated per
  // second. Unset = the memory-bound model (optimizer_step_ns in sim/cost/compute_model.hpp), right
  // for a GPU; a device whose Adam is compute-bound sets it (calibrate --backend host: a scalar
  // CPU loop with a sqrt and divisions per element, whose time its bytes at the measured
  // memory-pass rate do not predict).
  std::optional<double> device_adam_elements_per_s;

  // The YAML keys above whose value is a default estimate: no measurement for this GPU, and
  // neither the profile nor the scenario set them. Results resting on them say so (run,
  // compare and tune print them; summary.json lists them under `uncalibrated`).
  std::vector<std::string> uncalibrated;
};

// The DeepSpeed host terms (the host_*_ns fields), in declaration order: the YAML key (in us),
// the name summary.json gives the field (in ns), the field.
struct HostTerm {
  std::string_view yaml_key;
  std::string_view json_key;
  std::int64_t CalibrationConstants::*field;
};
std::span<const HostTerm> host_terms();

// The MAMF fraction measured for the named GPU (stas00/ml-engineering
// compute/accelerator/README.md): A100 SXM 0.869, A100 PCIe 0.811, H100 SXM 0.803 (H200 "the
// same"), GH200 0.838, B200 0.776, B300 0.786, GB200 0.729. Any other GPU: 0.8, an estimate amid
// those measurements, to be calibrated.
double default_gemm_efficiency(std::string_view gpu_model);

// The sustained share of the short-benchmark compute rates for the named GPU
// (CalibrationConstants::sustained_clock_fraction): Hopper 708.5 / 841.9, Blackwell 1456.3 /
// 1770.9, any other GPU 1 (no measurement).
double default_sustained_clock_fraction(std::string_view gpu_model);

// FlashAttention-2's measured fraction of the dense peak for the named GPU, forward and backward
// (head dim 128, long sequences). nullopt: no measurement at hand.
struct AttentionEfficiency {
  double forward = 0;
  double backward = 0;
};
std::optional<AttentionEfficiency> measured_attention_efficiency(std::string_view gpu_model);
// FlashAttention-3's, likewise: Hopper only (its kernels need sm90).
std::optional<AttentionEfficiency> measured_flash3_attention_efficiency(std::string_view gpu_model);

// Defaults for a GPU: CalibrationConstants{} with the GPU's measured GEMM and attention
// efficiencies where they exist, and `uncalibrated` naming the keys that rest on estimates.
CalibrationConstants default_calibration(std::string_view gpu_model);

// Reads a `calibration:` mapping over `base`: every key present replaces base's value, the rest
// stay. Strict: unknown keys (with the closest suggestion), non-numbers and values out of range
// are InputErrors naming file, line and key. An empty or missing section returns `base`.
CalibrationConstants read_calibration(const YamlSection& section, const CalibrationConstants& base);

}  // namespace prefetchlab::core
