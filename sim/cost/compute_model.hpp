#pragma once
// Device time of kernels, for one GPU of a hardware profile, and the host's cost of issuing work
// (sim/cost/host_cost_model.hpp).
// A kernel takes whichever is longer: its FLOPs at the dense peak times gemm_efficiency, or its
// memory traffic at peak bandwidth times memory_efficiency (a roofline with two measured
// ceilings: core/hardware/calibration.hpp names their sources), then times
// compute_time_scale. Durations are rounded to the nearest ns (std::llround: deterministic).
// Each module's own work is the kernels PyTorch eager runs for it (core/model/module_costs.hpp),
// priced one by one. GEMMs reach gemm_efficiency only when large: their FLOP ceiling is
// scaled by gemm_shape_fraction(M*N*K), fitted to an H100 BF16 torch.matmul sweep
// (zzc0721/torch-performance-test-data #79: 176.6 / 676.6 / 788.7 / 797.5 TFLOPS at
// 1024^3 / 2048^3 / 4096^3 / 8192^3). Memory-bound kernels are bytes over bandwidth.
// Not here: slow-down while collectives run on the same GPU (contention, see World).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/model/model_spec.hpp"
#include "sim/engine/event_engine.hpp"
#include "sim/cost/host_cost_model.hpp"

namespace prefetchlab::sim {

class ComputeModel {
 public:
  // `dtype` is the training dtype: GEMMs run at its peak (bf16/fp16 tensor cores; fp32 at the
  // profile's fp32 rate, since PyTorch does not use TF32 for matmuls by default). Throws
  // core::InputError naming the profile when it has no rate for that dtype.
  ComputeModel(const core::HardwareProfile& profile, const core::CalibrationConstants& calibration,
               core::DType dtype);

  // One kernel: max(flops / (peak * gemm_efficiency), bytes / (bandwidth * memory_efficiency))
  // * compute_time_scale. Doubles, since backward scales FLOPs by non-integer factors.
  TimeNs kernel_ns(double flops, double bytes) const;

  // Fraction of gemm_efficiency a GEMM of volume M*N*K reaches: 1 / (1 + (v0 / MNK)^p), with
  // p = 1.496 and v0 = 2.54e9 x (sm_count / 132) - the least-squares fit of
  // log(1/r - 1) on log(MNK) over the sweep points below the MAMF plateau (r = measured /
  // (989 x 0.803)); it reproduces the sweep within 3%. Scaling v0 by SMs (a GPU with fewer SMs
  // fills up with fewer tiles) is an estimate; calibrate on the real card.
  double gemm_shape_fraction(double mnk) const;
  // Tile and wave quantization of an M x N output (NVIDIA, "Matrix Multiplication Background
  // User's Guide", Deep Learning Performance documentation: tile and wave quantization): each SM
  // computes one 128 x 256 tile at a time, so a GEMM takes whole waves of sm_count tiles and pays
  // for the padding of its last row and column of tiles. The fraction is the useful share,
  // M N / (waves x sm_count x 128 x 256), once the output needs more than one wave; a GEMM that
  // fits in one wave is left to the volume curve (whose small sizes under-fill the GPU), and so
  // is one smaller than a tile either way (cuBLAS picks other tiles there). 1 without an SM count
  // and for fp32 training (SIMT kernels with other tiles).
  // The tile is one, fixed: cuBLAS chooses among several per shape, so this is an estimate.
  // Checked on one H200 (tests/sim/kernel_costs_test.cpp): with it, the volume curve and the
  // default gemm_efficiency (core/hardware/calibration.cpp), 8192^3 runs at 744 TFLOPS
  // (measured 762), a Llama-2-7B layer's forward GEMMs (M = 4096; N = 4096, 11008) 1.3% and
  // 2.3% slower than measured, a GPT-2-XL layer's (N = 4800, 1600, 6400) at 0.41 ms against
  // 0.43 (-5%; without it -20%).
  double gemm_wave_fraction(double m, double n) const;
  // How a GEMM kernel's output falls into tiles (describe --costs): M, the tiles, the waves of
  // sm_count tiles they take, and gemm_wave_fraction. Empty for a kernel that is not a GEMM, does
  // not know its N and K, or runs on a profile without an SM count.
  struct GemmTiles {
    double m = 0;
    double tiles = 0;
    double waves = 0;
    double fraction = 1;
  };
  std::optional<GemmTiles> gemm_tiles(const core::KernelSpec& kernel, std::int64_t micro_batch,
                                      std::int64_t seq_len) const;
  // One GEMM (M x K) x (K x N): 2MNK FLOPs at the shape's efficiency and quantization; memory
  // traffic ignored.
  TimeNs gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k) const;

  // One kernel of a module's own work (core/model/kernel_spec.hpp), forward, and what autograd
  // runs for it in backward (its backward kernels together, without launch gaps):
  //   gemm       FLOPs at gemm_efficiency x gemm_shape_fraction(its volume) x
  //              gemm_wave_fraction(its M, N) where the kernel knows N and K, or its bytes;
  //   attention  FLOPs at attention_efficiency (backward: attention_backward_efficiency) x
  //              attention_seq_fraction(s), or its bytes; FlashAttention-3 kernels at
  //              attention_flash3_efficiency (backward: attention_flash3_backward_efficiency) x
  //              its own curve;
  //   memory     bytes at the memory ceiling, or its FLOPs at the dense ceiling.
  TimeNs kernel_forward_ns(const core::KernelSpec& kernel, std::int64_t micro_batch, std::int64_t seq_len) const;
  TimeNs kernel_backward_ns(const core::KernelSpec& kernel, std::int64_t micro_batch, std::int64_t seq_len) const;

  // Fraction of the attention plateau a fused attention kernel reaches at sequence length s:
  // 1 / (1 + (s0 / s)^p), the least-squares fit of FlashAttention-2's H100 curve (head dim 128,
  // 512 to 16k tokens: forward causal 191..335 TFLOPS, s0 = 412, p = 1.30; backward 214..322,
  // s0 = 277, p = 1.12; Shah et al. 2024, arXiv:2407.08608, figures 5 and 6); within 3% of each
  // point. Short sequences leave more of the causal diagonal's blocks half-empty.
  // FlashAttention-3's own curve from the same figures: forward causal 292..616 TFLOPS, s0 = 561,
  // p = 1.34; backward 316..561, s0 = 433, p = 1.38 (within 4% of each point).
  static double attention_seq_fraction(std::int64_t seq_len, bool backward,
                                       core::AttentionKernel kernel = core::AttentionKernel::kFlash2);

  // A module's own work (children excluded) on the compute stream: its kernels back to back,
  // each kernel_gap after the previous one, and none before the host issued it (one launch per
  // kernel, forward_op_host_ns or backward_op_host_ns apart, the first at 0): so a module of
  // many small kernels is as
  // slow as the host that issues them. The simulator launches it as one span of this length;
  // when the stream is still busy with earlier work the host-issue stalls it includes would
  // have been hidden (an overestimate only where both the host and the device are the limit).
  TimeNs module_forward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                           std::int64_t seq_len) const;
  TimeNs module_backward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                            std::int64_t seq_len) const;
  // Kernels of these durations issued issue_interval_ns apart (the first at 0), run back to back
  // kernel_gap apart on a stream that is busy for backlog_ns more before it can start the first:
  // the span from that start to the last kernel's end. A host that issues slower than the
  // device runs stalls the span, unless the backlog already covers the issue time.
  TimeNs stream_ns(const std::vector<TimeNs>& kernel_ns, TimeNs issue_interval_ns, TimeNs backlog_ns = 0) const;
  // The module's own kernels' device times, in launch order (backward: autograd's order, each
  // kernel's backward time split over its backward kernels).
  std::vector<TimeNs> module_forward_kernel_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                               std::int64_t seq_len) const;
  std::vector<TimeNs> module_backward_kernel_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                                std::int64_t seq_len) const;
  // How many kernels the host launches for the module's own forward and backward.
  static std::int64_t forward_kernel_count(const core::ModuleSpec& module);
  static std::int64_t backward_kernel_count(const core::ModuleSpec& module);

  // Device-to-device copy of `bytes`: reads and writes each byte once.
  TimeNs copy_ns(std::int64_t bytes) const;

  // Adam over this rank's fp32 shard of `shard_numel` elements: memory-bound (~12 FLOPs per
  // element against ~70 bytes). Bytes per element, following DeepSpeed's stage3.py step()
  // (DeepSpeed 0.12 onward), e = the training dtype's size (2 for bf16/fp16):
  //   fp16 only, has_overflow: isinf(...).any(), isnan(...).any()  2 x (e + 2)
  //     over the flat gradient partition buffer (bf16 is not checked since #4512)
  //   get_grad_norm_direct: g.double().norm(2) per gradient   e + 8 + 8 (read, write, read)
  //   _prepare_fp32_grad_for_sub_group: flatten (torch.cat)   2e    (read, write)
  //     then .to(fp32), a no-op when e = 4                    e + 4 (read, write)
  //   unscale_and_clip_grads: fp32 grad.mul_(1 / scale),      8
  //     run every step since #1453
  //   fused Adam: read param, grad, exp_avg, exp_avg_sq       16
  //               write param, exp_avg, exp_avg_sq            12
  //   _reassign_or_swap_out_partitioned_parameters: the fp32  4 + e (read, write)
  //     master copied into the e-byte param shard
  // = 70 bytes for bf16, 78 for fp16, 72 for fp32. The 12 bytes of fp32 master + m + v are the
  // ZeRO paper's K = 12 (Rajbhandari et al. 2020, arXiv:1910.02054); the per-kernel traffic is this
  // reading of DeepSpeed's code, not measured. A calibrated device_adam_elements_per_s (a
  // measured step) replaces the derivation.
  TimeNs optimizer_step_ns(std::int64_t shard_numel) const;
  static std::int64_t optimizer_bytes_per_element(core::DType dtype);

  // The host's costs per call (kernel launches, DeepSpeed's hooks, fetch, gathers, release,
  // reduce and step), scaled by the calibration's host_speed.
  const HostCostModel& host() const { return host_; }

  // The two ceilings, after efficiency (for reports and tests).
  double effective_flops_per_s() const { return effective_flops_per_s_; }
  double effective_memory_bytes_per_s() const { return effective_memory_bytes_per_s_; }

 private:
  TimeNs kernel_ns_at(double flops, double bytes, double shape_fraction) const;
  GemmTiles tiles_of(double m, double n) const;  // gemm_wave_fraction's count, whole
  double gemm_fraction(const core::KernelSpec& kernel, std::int64_t micro_batch, std::int64_t seq_len) const;

  double gemm_half_volume_ = 0;  // v0, scaled by the GPU's SMs
  int sm_count_ = 0;             // 0: no wave quantization
  double gemm_backward_rate_ratio_ = 1;
  double effective_flops_per_s_ = 0;
  double attention_flops_per_s_ = 0;
  double attention_backward_flops_per_s_ = 0;
  double flash3_flops_per_s_ = 0;           // 0: no FlashAttention-3 on this GPU
  double flash3_backward_flops_per_s_ = 0;
  // The attention rate of `kernel` (forward or backward) relative to the GEMM rate, at s.
  double attention_fraction(const core::KernelSpec& kernel, std::int64_t seq_len, bool backward) const;
  TimeNs kernel_gap_ns_ = 0;
  double effective_memory_bytes_per_s_ = 0;
  double compute_time_scale_ = 1;
  double copy_time_scale_ = 1;
  std::optional<double> device_adam_elements_per_s_;
  core::DType dtype_;
  HostCostModel host_;
};

}  // namespace prefetchlab::sim
