#include "sim/cost/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/hardware/hardware_derived.hpp"
#include "core/input/input_error.hpp"

namespace prefetchlab::sim {
namespace {

// Bytes per element of fp32 Adam state traffic in the fused update: read param, grad, m, v
// (4 x 4), write param, m, v (3 x 4). See optimizer_step_ns in the header.
constexpr std::int64_t kFusedAdamBytes = 16 + 12;
constexpr std::int64_t kFp32Bytes = 4;

// GEMM shape efficiency fit (see gemm_shape_fraction in the header).
constexpr double kGemmShapeExponent = 1.496;
constexpr double kGemmHalfVolume = 2.54e9;  // M*N*K at which an H100 reaches half its plateau
constexpr double kGemmReferenceSms = 132;   // H100 SXM, the GPU of the sweep

// Tile and wave quantization (see gemm_wave_fraction in the header): the output tile one SM
// computes at a time, rows x columns.
constexpr double kGemmTileRows = 128;
constexpr double kGemmTileCols = 256;

// Attention sequence-length fit (see attention_seq_fraction in the header).
constexpr double kAttentionHalfSeqForward = 412;
constexpr double kAttentionExponentForward = 1.30;
constexpr double kAttentionHalfSeqBackward = 277;
constexpr double kAttentionExponentBackward = 1.12;
constexpr double kFlash3HalfSeqForward = 561;
constexpr double kFlash3ExponentForward = 1.34;
constexpr double kFlash3HalfSeqBackward = 433;
constexpr double kFlash3ExponentBackward = 1.38;

TimeNs to_ns(double seconds) {
  const double ns = std::round(seconds * 1e9);
  if (!(ns < 4e18)) throw std::overflow_error("kernel duration does not fit in int64 ns");
  return static_cast<TimeNs>(ns);
}

// A GEMM kernel's M*N*K at this micro-batch (as a double: a token share may make it fractional).
double gemm_volume(const core::KernelSpec& kernel, std::int64_t micro_batch, std::int64_t seq_len) {
  const core::TokenScaled& v = kernel.gemm_volume;
  const double b = static_cast<double>(micro_batch);
  const double s = static_cast<double>(seq_len);
  return static_cast<double>(v.fixed) +
         b * s * (static_cast<double>(v.per_token) + static_cast<double>(v.per_token_per_position) * s);
}

TimeNs scaled(std::int64_t ns, double scale) {
  return std::llround(static_cast<double>(ns) * scale);
}

}  // namespace

ComputeModel::ComputeModel(const core::HardwareProfile& profile,
                           const core::CalibrationConstants& calibration, core::DType dtype)
    : compute_time_scale_(calibration.compute_time_scale),
      copy_time_scale_(calibration.copy_time_scale),
      device_adam_elements_per_s_(calibration.device_adam_elements_per_s),
      dtype_(dtype),
      host_(calibration) {
  const auto peak = core::peak_dense_flops_per_s(profile, dtype);
  if (!peak || *peak <= 0) {
    throw core::InputError(
        {profile.source_file, 0}, "gpu.fp32_tflops",
        std::string("is missing, but the training dtype is ") + core::dtype_name(dtype),
        "the GPU's fp32 rate in TFLOPS in the hardware profile, or dtype bf16");
  }
  if (profile.gpu.memory_bandwidth_bytes_per_s <= 0 || calibration.gemm_efficiency <= 0 ||
      calibration.attention_efficiency <= 0 || calibration.attention_backward_efficiency <= 0 ||
      calibration.memory_efficiency <= 0 || calibration.compute_time_scale < 0 ||
      calibration.sustained_clock_fraction <= 0 ||
      calibration.gemm_backward_rate_ratio <= 0) {
    throw std::invalid_argument("ComputeModel needs positive peaks and efficiencies");
  }
  // Compute-bound kernels run at the clocks the board sustains under training load, below the
  // short benchmarks' (CalibrationConstants::sustained_clock_fraction).
  const double sustained = calibration.sustained_clock_fraction;
  effective_flops_per_s_ = *peak * calibration.gemm_efficiency * sustained;
  attention_flops_per_s_ = *peak * calibration.attention_efficiency * sustained;
  attention_backward_flops_per_s_ = *peak * calibration.attention_backward_efficiency * sustained;
  flash3_flops_per_s_ = *peak * calibration.attention_flash3_efficiency * sustained;
  flash3_backward_flops_per_s_ = *peak * calibration.attention_flash3_backward_efficiency * sustained;
  kernel_gap_ns_ = calibration.kernel_gap_ns;
  gemm_backward_rate_ratio_ = calibration.gemm_backward_rate_ratio;
  // The tile is a 16-bit tensor-core GEMM's; fp32 GEMMs (SIMT kernels, other tiles) keep the
  // volume curve alone.
  sm_count_ = dtype == core::DType::kFP32 ? 0 : profile.gpu.sm_count;
  gemm_half_volume_ = calibration.gemm_half_volume_mnk ? *calibration.gemm_half_volume_mnk :
      kGemmHalfVolume * (profile.gpu.sm_count > 0 ? profile.gpu.sm_count / kGemmReferenceSms : 1.0);
  effective_memory_bytes_per_s_ =
      profile.gpu.memory_bandwidth_bytes_per_s * calibration.memory_efficiency;
}

TimeNs ComputeModel::kernel_ns(double flops, double bytes) const {
  return kernel_ns_at(flops, bytes, 1.0);
}

TimeNs ComputeModel::kernel_ns_at(double flops, double bytes, double shape_fraction) const {
  if (flops < 0 || bytes < 0) throw std::invalid_argument("kernel with negative FLOPs or bytes");
  if (compute_time_scale_ == 0) return 0;
  const double seconds = std::max(flops / (effective_flops_per_s_ * shape_fraction),
                                  bytes / effective_memory_bytes_per_s_);
  return to_ns(seconds * compute_time_scale_);
}

double ComputeModel::gemm_shape_fraction(double mnk) const {
  if (!(mnk > 0)) return 1.0;  // no GEMM: nothing to scale
  return 1.0 / (1.0 + std::pow(gemm_half_volume_ / mnk, kGemmShapeExponent));
}

ComputeModel::GemmTiles ComputeModel::tiles_of(double m, double n) const {
  GemmTiles t;
  t.m = m;
  t.tiles = std::ceil(m / kGemmTileRows) * std::ceil(n / kGemmTileCols);
  if (sm_count_ <= 0) return t;
  const double sms = static_cast<double>(sm_count_);
  t.waves = std::ceil(t.tiles / sms);
  // One wave, partly filled, is the volume curve's (its small sizes); so is an output smaller
  // than a tile either way.
  if (t.tiles > sms && m >= kGemmTileRows && n >= kGemmTileCols) {
    t.fraction = m * n / (t.waves * sms * kGemmTileRows * kGemmTileCols);
  }
  return t;
}

double ComputeModel::gemm_wave_fraction(double m, double n) const { return tiles_of(m, n).fraction; }

TimeNs ComputeModel::gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k) const {
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return kernel_ns_at(2.0 * mnk, 0,
                      gemm_shape_fraction(mnk) * gemm_wave_fraction(static_cast<double>(m), static_cast<double>(n)));
}

double ComputeModel::attention_seq_fraction(std::int64_t seq_len, bool backward, core::AttentionKernel kernel) {
  if (seq_len <= 0) return 1.0;
  const bool flash3 = kernel == core::AttentionKernel::kFlash3;
  const double half = flash3 ? (backward ? kFlash3HalfSeqBackward : kFlash3HalfSeqForward)
                             : (backward ? kAttentionHalfSeqBackward : kAttentionHalfSeqForward);
  const double exponent = flash3 ? (backward ? kFlash3ExponentBackward : kFlash3ExponentForward)
                                 : (backward ? kAttentionExponentBackward : kAttentionExponentForward);
  return 1.0 / (1.0 + std::pow(half / static_cast<double>(seq_len), exponent));
}

double ComputeModel::attention_fraction(const core::KernelSpec& kernel, std::int64_t seq_len, bool backward) const {
  const bool flash3 = kernel.attention_kernel == core::AttentionKernel::kFlash3;
  const double rate = flash3 ? (backward ? flash3_backward_flops_per_s_ : flash3_flops_per_s_)
                             : (backward ? attention_backward_flops_per_s_ : attention_flops_per_s_);
  if (!(rate > 0)) {
    throw std::invalid_argument("a FlashAttention-3 kernel on a GPU without its rates (attention_flash3_efficiency)");
  }
  return rate / effective_flops_per_s_ * attention_seq_fraction(seq_len, backward, kernel.attention_kernel);
}

std::optional<ComputeModel::GemmTiles> ComputeModel::gemm_tiles(const core::KernelSpec& kernel, std::int64_t micro_batch,
                                                                std::int64_t seq_len) const {
  if (kernel.kind != core::KernelKind::kGemm || kernel.gemm_n <= 0 || kernel.gemm_k <= 0 || sm_count_ <= 0) {
    return std::nullopt;
  }
  const double n = static_cast<double>(kernel.gemm_n);
  return tiles_of(gemm_volume(kernel, micro_batch, seq_len) / (n * static_cast<double>(kernel.gemm_k)), n);
}

double ComputeModel::gemm_fraction(const core::KernelSpec& kernel, std::int64_t micro_batch,
                                   std::int64_t seq_len) const {
  const double volume = gemm_volume(kernel, micro_batch, seq_len);
  if (kernel.gemm_n <= 0 || kernel.gemm_k <= 0) return gemm_shape_fraction(volume);
  const double n = static_cast<double>(kernel.gemm_n);
  return gemm_shape_fraction(volume) * gemm_wave_fraction(volume / (n * static_cast<double>(kernel.gemm_k)), n);
}

TimeNs ComputeModel::kernel_forward_ns(const core::KernelSpec& kernel, std::int64_t micro_batch,
                                       std::int64_t seq_len) const {
  const double flops = static_cast<double>(kernel.flops.at(micro_batch, seq_len));
  const double bytes = static_cast<double>(kernel.bytes.at(micro_batch, seq_len));
  switch (kernel.kind) {
    case core::KernelKind::kGemm: return kernel_ns_at(flops, bytes, gemm_fraction(kernel, micro_batch, seq_len));
    case core::KernelKind::kAttention:
      return kernel_ns_at(flops, bytes, attention_fraction(kernel, seq_len, false));
    case core::KernelKind::kMemory: return kernel_ns_at(flops, bytes, 1.0);
  }
  throw std::logic_error("kernel_forward_ns: unknown KernelKind");
}

TimeNs ComputeModel::kernel_backward_ns(const core::KernelSpec& kernel, std::int64_t micro_batch,
                                        std::int64_t seq_len) const {
  if (kernel.backward_kernels <= 0) return 0;
  const double flops = kernel.backward_flops_factor * static_cast<double>(kernel.flops.at(micro_batch, seq_len));
  const double bytes = kernel.backward_bytes_factor * static_cast<double>(kernel.bytes.at(micro_batch, seq_len));
  switch (kernel.kind) {
    // dgrad and wgrad have the forward GEMM's M*N*K, so the same shape efficiency (and, an
    // estimate, the forward output's quantization), at the backward's measured share of the
    // forward's rate.
    case core::KernelKind::kGemm:
      return kernel_ns_at(flops, bytes, gemm_backward_rate_ratio_ * gemm_fraction(kernel, micro_batch, seq_len));
    case core::KernelKind::kAttention:
      return kernel_ns_at(flops, bytes, attention_fraction(kernel, seq_len, true));
    case core::KernelKind::kMemory: return kernel_ns_at(flops, bytes, 1.0);
  }
  throw std::logic_error("kernel_backward_ns: unknown KernelKind");
}

TimeNs ComputeModel::stream_ns(const std::vector<TimeNs>& kernel_ns, TimeNs launch_ns, TimeNs backlog_ns) const {
  if (compute_time_scale_ == 0) return 0;  // the free-compute what-if: no device time at all
  TimeNs end_ns = 0;
  for (std::size_t i = 0; i < kernel_ns.size(); ++i) {
    const TimeNs issued_ns = std::max<TimeNs>(0, static_cast<TimeNs>(i) * launch_ns - backlog_ns);
    const TimeNs ready_ns = i == 0 ? 0 : end_ns + kernel_gap_ns_;
    end_ns = std::max(issued_ns, ready_ns) + kernel_ns[i];
  }
  return end_ns;
}

std::vector<TimeNs> ComputeModel::module_forward_kernel_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                                           std::int64_t seq_len) const {
  std::vector<TimeNs> durations;
  durations.reserve(module.kernels.size());
  for (const auto& kernel : module.kernels) durations.push_back(kernel_forward_ns(kernel, micro_batch, seq_len));
  return durations;
}

std::vector<TimeNs> ComputeModel::module_backward_kernel_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                                            std::int64_t seq_len) const {
  // A kernel's backward kernels are charged as equal parts of its backward time, in the reverse
  // order of the forward (autograd's).
  std::vector<TimeNs> durations;
  for (auto it = module.kernels.rbegin(); it != module.kernels.rend(); ++it) {
    const int count = it->backward_kernels;
    if (count <= 0) continue;
    const TimeNs total = kernel_backward_ns(*it, micro_batch, seq_len);
    for (int i = 0; i < count; ++i) durations.push_back(total / count + (i < total % count ? 1 : 0));
  }
  return durations;
}

TimeNs ComputeModel::module_forward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                       std::int64_t seq_len) const {
  return stream_ns(module_forward_kernel_ns(module, micro_batch, seq_len), host_.forward_op_host_ns());
}

TimeNs ComputeModel::module_backward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                        std::int64_t seq_len) const {
  return stream_ns(module_backward_kernel_ns(module, micro_batch, seq_len), host_.backward_op_host_ns());
}

std::int64_t ComputeModel::forward_kernel_count(const core::ModuleSpec& module) {
  return static_cast<std::int64_t>(module.kernels.size());
}

std::int64_t ComputeModel::backward_kernel_count(const core::ModuleSpec& module) {
  std::int64_t count = 0;
  for (const auto& kernel : module.kernels) count += std::max(0, kernel.backward_kernels);
  return count;
}

TimeNs ComputeModel::copy_ns(std::int64_t bytes) const {
  return scaled(kernel_ns(0, 2.0 * static_cast<double>(bytes)), copy_time_scale_);
}

std::int64_t ComputeModel::optimizer_bytes_per_element(core::DType dtype) {
  const std::int64_t e = core::dtype_bytes(dtype);
  const std::int64_t overflow_check = dtype == core::DType::kFP16 ? 2 * (e + 2) : 0;
  const std::int64_t grad_norm_in_double = e + 8 + 8;
  const std::int64_t flatten = 2 * e;
  const std::int64_t grad_upcast = e == kFp32Bytes ? 0 : e + kFp32Bytes;
  const std::int64_t unscale = 2 * kFp32Bytes;
  const std::int64_t master_to_param = kFp32Bytes + e;
  return overflow_check + grad_norm_in_double + flatten + grad_upcast + unscale + kFusedAdamBytes +
         master_to_param;
}

TimeNs ComputeModel::optimizer_step_ns(std::int64_t shard_numel) const {
  if (shard_numel < 0) throw std::invalid_argument("optimizer step over a negative shard");
  if (device_adam_elements_per_s_) {
    return to_ns(static_cast<double>(shard_numel) / *device_adam_elements_per_s_ * compute_time_scale_);
  }
  return kernel_ns(0, static_cast<double>(shard_numel) *
                          static_cast<double>(optimizer_bytes_per_element(dtype_)));
}

}  // namespace prefetchlab::sim
