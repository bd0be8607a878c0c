#include "compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/hardware/hardware_derived.hpp"
#include "core/input/input_error.hpp"

namespace prefetchlab::sim {
namespace {

// Flash-style attention backward ~2.5x its forward (5 vs 2 matmuls, Dao et al. 2022; an estimate),
// split over the two backward kernels this model charges.
constexpr double kAttentionBackwardPerKernel = 2.5 / 2.0;
constexpr int kBackwardKernels = 2;

// Bytes per element of fp32 Adam state traffic in the fused update: read param, grad, m, v
// (4 x 4), write param, m, v (3 x 4). See optimizer_step_ns in the header.
constexpr std::int64_t kFusedAdamBytes = 16 + 12;
constexpr std::int64_t kFp32Bytes = 4;

// GEMM shape efficiency fit (see gemm_shape_fraction in the header).
constexpr double kGemmShapeExponent = 1.496;
constexpr double kGemmHalfVolume = 2.54e9;  // M*N*K at which an H100 reaches half its plateau
constexpr double kGemmReferenceSms = 132;   // H100 SXM, the GPU of the sweep

TimeNs to_ns(double seconds) {
  const double ns = std::round(seconds * 1e9);
  if (!(ns < 4e18)) throw std::overflow_error("kernel duration does not fit in int64 ns");
  return static_cast<TimeNs>(ns);
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
      calibration.memory_efficiency <= 0 || calibration.compute_time_scale < 0) {
    throw std::invalid_argument("ComputeModel needs positive peaks and efficiencies");
  }
  effective_flops_per_s_ = *peak * calibration.gemm_efficiency;
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

TimeNs ComputeModel::gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k) const {
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return kernel_ns_at(2.0 * mnk, 0, gemm_shape_fraction(mnk));
}

double ComputeModel::module_shape_fraction(const core::ModuleSpec& module,
                                           std::int64_t micro_batch, std::int64_t seq_len) const {
  if (module.class_name != "Linear" && module.class_name != "Conv1D") return 1.0;
  // linear_costs: per-token FLOPs = 2 * in * out, so N*K = per_token / 2.
  const double tokens = static_cast<double>(micro_batch) * static_cast<double>(seq_len);
  return gemm_shape_fraction(tokens * static_cast<double>(module.forward_flops.per_token) / 2.0);
}

TimeNs ComputeModel::module_forward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                       std::int64_t seq_len) const {
  return kernel_ns_at(static_cast<double>(module.forward_flops.at(micro_batch, seq_len)),
                      static_cast<double>(module.forward_bytes.at(micro_batch, seq_len)),
                      module_shape_fraction(module, micro_batch, seq_len));
}

TimeNs ComputeModel::module_backward_ns(const core::ModuleSpec& module, std::int64_t micro_batch,
                                        std::int64_t seq_len) const {
  const double flops = static_cast<double>(module.forward_flops.at(micro_batch, seq_len));
  // The s^2 terms of TokenScaled are the attention core's (model_spec.hpp).
  const double attention_flops = static_cast<double>(micro_batch) * static_cast<double>(seq_len) *
                                 static_cast<double>(seq_len) *
                                 static_cast<double>(module.forward_flops.per_token_per_position);
  const double per_kernel_flops =
      flops - attention_flops + kAttentionBackwardPerKernel * attention_flops;
  const double bytes = static_cast<double>(module.forward_bytes.at(micro_batch, seq_len));
  // dgrad and wgrad have the forward GEMM's M*N*K, so the same shape efficiency.
  return kBackwardKernels *
         kernel_ns_at(per_kernel_flops, bytes, module_shape_fraction(module, micro_batch, seq_len));
}

TimeNs ComputeModel::copy_ns(std::int64_t bytes) const {
  return scaled(kernel_ns(0, 2.0 * static_cast<double>(bytes)), copy_time_scale_);
}

std::int64_t ComputeModel::optimizer_bytes_per_element(core::DType dtype) {
  const std::int64_t e = core::dtype_bytes(dtype);
  const std::int64_t grad_norm = e;
  const std::int64_t grad_upcast = e + kFp32Bytes;
  const std::int64_t master_to_param = kFp32Bytes + e;
  return grad_norm + grad_upcast + kFusedAdamBytes + master_to_param;
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
