#include "gpu_backend/device/host_layer_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "gpu_backend/device/bf16.hpp"
#include "gpu_backend/device/fused_kernel_checks.hpp"
#include "gpu_backend/device/host_kernels.hpp"

namespace prefetchlab::gpu::host {
namespace {

// Element i of a bf16 or fp32 operand (the host device has no fp16 arithmetic).
float load(ElementType type, DeviceSpan span, std::int64_t i) {
  if (type == ElementType::kBF16) return bf16_to_float(static_cast<const std::uint16_t*>(pointer(span))[i]);
  return static_cast<const float*>(pointer(span))[i];
}
void store(ElementType type, DeviceSpan span, std::int64_t i, float value) {
  if (type == ElementType::kBF16) {
    static_cast<std::uint16_t*>(pointer(span))[i] = float_to_bf16(value);
  } else {
    static_cast<float*>(pointer(span))[i] = value;
  }
}
void require_host_type(ElementType type, const char* kernel) {
  if (type != ElementType::kBF16 && type != ElementType::kFP32) {
    throw std::invalid_argument(std::string(kernel) + " on the host device takes bf16 or fp32, not " + element_type_name(type));
  }
}
float activate(Activation a, float x) { return a == Activation::kGeluTanh ? gelu_tanh(x) : x; }
float activate_derivative(Activation a, float x) { return a == Activation::kGeluTanh ? gelu_tanh_derivative(x) : 1.0f; }
float* f32(DeviceSpan span) { return static_cast<float*>(pointer(span)); }

}  // namespace

float gelu_tanh(float x) {
  const float inner = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

float gelu_tanh_derivative(float x) {
  const float inner = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(inner);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

void run_bias_activation(const BiasActivationArgs& a) {
  check_args(a);
  require_host_type(a.type, "bias_activation");
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const std::int64_t i = r * a.cols + c;
      float v = load(a.type, a.x, i);
      if (a.bias.bytes != 0) v += load(a.type, a.bias, c);
      v = activate(a.activation, v);
      if (a.residual.bytes != 0) v += load(a.type, a.residual, i);
      store(a.type, a.dst, i, v);
    }
  }
}

void run_bias_activation_backward(const BiasActivationBackwardArgs& a) {
  check_args(a);
  require_host_type(a.type, "bias_activation_backward");
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const std::int64_t i = r * a.cols + c;
      float pre = load(a.type, a.x, i);
      if (a.bias.bytes != 0) pre += load(a.type, a.bias, c);
      store(a.type, a.dx, i, load(a.type, a.dy, i) * activate_derivative(a.activation, pre));
    }
  }
}

void run_layer_norm(const LayerNormArgs& a) {
  check_args(a);
  require_host_type(a.type, "layer_norm");
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t row = r * a.cols;
    double sum = 0;
    for (std::int64_t c = 0; c < a.cols; ++c) sum += load(a.type, a.x, row + c);
    const double mean = sum / static_cast<double>(a.cols);
    double squares = 0;  // two passes: no cancellation in E[x^2] - mean^2
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const double d = load(a.type, a.x, row + c) - mean;
      squares += d * d;
    }
    const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(a.cols) + a.eps));
    f32(a.mean)[r] = static_cast<float>(mean);
    f32(a.rstd)[r] = rstd;
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const float xhat = (load(a.type, a.x, row + c) - static_cast<float>(mean)) * rstd;
      store(a.type, a.y, row + c, xhat * load(a.type, a.gamma, c) + load(a.type, a.beta, c));
    }
  }
}

void run_layer_norm_backward(const LayerNormBackwardArgs& a) {
  check_args(a);
  require_host_type(a.type, "layer_norm_backward");
  std::vector<double> dgamma(static_cast<std::size_t>(a.cols), 0.0), dbeta(static_cast<std::size_t>(a.cols), 0.0);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t row = r * a.cols;
    const float mean = f32(a.mean)[r], rstd = f32(a.rstd)[r];
    // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma.
    double sum_g = 0, sum_g_xhat = 0;
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const float dy = load(a.type, a.dy, row + c);
      const float xhat = (load(a.type, a.x, row + c) - mean) * rstd;
      const float g = dy * load(a.type, a.gamma, c);
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * xhat;
      dgamma[static_cast<std::size_t>(c)] += static_cast<double>(dy) * xhat;
      dbeta[static_cast<std::size_t>(c)] += dy;
    }
    const auto mean_g = static_cast<float>(sum_g / static_cast<double>(a.cols));
    const auto mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(a.cols));
    for (std::int64_t c = 0; c < a.cols; ++c) {
      const float xhat = (load(a.type, a.x, row + c) - mean) * rstd;
      const float g = load(a.type, a.dy, row + c) * load(a.type, a.gamma, c);
      store(a.type, a.dx, row + c, rstd * (g - mean_g - xhat * mean_g_xhat));
    }
  }
  for (std::int64_t c = 0; c < a.cols; ++c) {
    store(a.type, a.dgamma, c, static_cast<float>(dgamma[static_cast<std::size_t>(c)]));
    store(a.type, a.dbeta, c, static_cast<float>(dbeta[static_cast<std::size_t>(c)]));
  }
}

void run_multi_tensor_adam(const std::vector<AdamArgs>& tensors, const AdamChunkLimits& limits) {
  if (tensors.empty()) return;
  check_args(tensors);
  std::vector<std::int64_t> numels;
  for (const AdamArgs& t : tensors) numels.push_back(t.numel);
  const std::int64_t bytes16 = element_bytes(tensors.front().param_type);
  for (const AdamLaunch& launch : plan_adam_chunks(numels, limits)) {
    for (const AdamLaunch::Block& block : launch.blocks) {
      const AdamArgs& t = tensors[static_cast<std::size_t>(launch.tensors[static_cast<std::size_t>(block.slot)])];
      const std::int64_t begin = block.chunk * limits.chunk_numel;
      const std::int64_t numel = std::min(limits.chunk_numel, t.numel - begin);
      auto part = [&](DeviceSpan span, std::int64_t bytes_each) {
        return span.sub(static_cast<std::uint64_t>(begin * bytes_each), static_cast<std::uint64_t>(numel * bytes_each));
      };
      AdamArgs chunk = t;
      chunk.params = part(t.params, bytes16);
      chunk.grads = part(t.grads, bytes16);
      chunk.master = part(t.master, 4);
      chunk.exp_avg = part(t.exp_avg, 4);
      chunk.exp_avg_sq = part(t.exp_avg_sq, 4);
      chunk.numel = numel;
      run_adam(chunk);
    }
  }
}

}  // namespace prefetchlab::gpu::host
