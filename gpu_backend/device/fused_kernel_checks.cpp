#include "gpu_backend/device/fused_kernel_checks.hpp"

#include <stdexcept>
#include <string>

namespace prefetchlab::gpu {
namespace {

void require_shape(const char* kernel, std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument(std::string(kernel) + ": rows and cols must be positive (got " + std::to_string(rows) +
                                " x " + std::to_string(cols) + ")");
  }
}

// `span` holds `numel` elements of `bytes_each`; an optional operand may be empty.
void require_span(const char* kernel, const char* name, DeviceSpan span, std::int64_t numel, std::int64_t bytes_each,
                  bool optional = false) {
  if (optional && span.bytes == 0) return;
  const auto needed = static_cast<std::uint64_t>(numel * bytes_each);
  if (span.address == 0 || span.bytes < needed) {
    throw std::invalid_argument(std::string(kernel) + ": operand " + name + " needs " + std::to_string(needed) +
                                " bytes but its span holds " + std::to_string(span.bytes));
  }
}

void require_training_type(const char* kernel, ElementType type) {
  if (type == ElementType::kFP64) throw std::invalid_argument(std::string(kernel) + ": fp64 is not a training type");
}

}  // namespace

void check_args(const BiasActivationArgs& a) {
  constexpr const char* k = "bias_activation";
  require_training_type(k, a.type);
  require_shape(k, a.rows, a.cols);
  const std::int64_t e = element_bytes(a.type);
  require_span(k, "dst", a.dst, a.rows * a.cols, e);
  require_span(k, "x", a.x, a.rows * a.cols, e);
  require_span(k, "bias", a.bias, a.cols, e, true);
  require_span(k, "residual", a.residual, a.rows * a.cols, e, true);
}

void check_args(const BiasActivationBackwardArgs& a) {
  constexpr const char* k = "bias_activation_backward";
  require_training_type(k, a.type);
  require_shape(k, a.rows, a.cols);
  const std::int64_t e = element_bytes(a.type);
  require_span(k, "dx", a.dx, a.rows * a.cols, e);
  require_span(k, "dy", a.dy, a.rows * a.cols, e);
  require_span(k, "x", a.x, a.rows * a.cols, e);
  require_span(k, "bias", a.bias, a.cols, e, true);
}

void check_args(const LayerNormArgs& a) {
  constexpr const char* k = "layer_norm";
  require_training_type(k, a.type);
  require_shape(k, a.rows, a.cols);
  if (!(a.eps > 0.0f)) throw std::invalid_argument("layer_norm: eps must be positive");
  const std::int64_t e = element_bytes(a.type);
  require_span(k, "y", a.y, a.rows * a.cols, e);
  require_span(k, "x", a.x, a.rows * a.cols, e);
  require_span(k, "gamma", a.gamma, a.cols, e);
  require_span(k, "beta", a.beta, a.cols, e);
  require_span(k, "mean", a.mean, a.rows, 4);
  require_span(k, "rstd", a.rstd, a.rows, 4);
}

void check_args(const LayerNormBackwardArgs& a) {
  constexpr const char* k = "layer_norm_backward";
  require_training_type(k, a.type);
  require_shape(k, a.rows, a.cols);
  const std::int64_t e = element_bytes(a.type);
  require_span(k, "dx", a.dx, a.rows * a.cols, e);
  require_span(k, "dgamma", a.dgamma, a.cols, e);
  require_span(k, "dbeta", a.dbeta, a.cols, e);
  require_span(k, "dy", a.dy, a.rows * a.cols, e);
  require_span(k, "x", a.x, a.rows * a.cols, e);
  require_span(k, "gamma", a.gamma, a.cols, e);
  require_span(k, "mean", a.mean, a.rows, 4);
  require_span(k, "rstd", a.rstd, a.rows, 4);
}

void check_args(const std::vector<AdamArgs>& tensors) {
  constexpr const char* k = "multi_tensor_adam";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const AdamArgs& t = tensors[i];
    const AdamArgs& first = tensors.front();
    if (t.param_type != first.param_type || t.lr != first.lr || t.beta1 != first.beta1 || t.beta2 != first.beta2 ||
        t.eps != first.eps || t.step != first.step) {
      throw std::invalid_argument(std::string(k) + ": tensor " + std::to_string(i) +
                                  " has another type or hyper-parameters than tensor 0 (one launch shares them)");
    }
    require_training_type(k, t.param_type);
    if (t.numel < 0) throw std::invalid_argument(std::string(k) + ": tensor " + std::to_string(i) + " has a negative numel");
    if (t.numel == 0) continue;
    const std::int64_t e = element_bytes(t.param_type);
    require_span(k, "params", t.params, t.numel, e);
    require_span(k, "grads", t.grads, t.numel, e);
    require_span(k, "master", t.master, t.numel, 4);
    require_span(k, "exp_avg", t.exp_avg, t.numel, 4);
    require_span(k, "exp_avg_sq", t.exp_avg_sq, t.numel, 4);
  }
}

}  // namespace prefetchlab::gpu
