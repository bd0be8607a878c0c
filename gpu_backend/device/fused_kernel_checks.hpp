#pragma once
// Argument checks shared by every device's fused kernels and multi-tensor Adam, so a bad call
// fails with the same std::invalid_argument on the host device (CI) as on a GPU, before any
// kernel reads out of bounds.
#include <vector>

#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu {

void check_args(const BiasActivationArgs& args);
void check_args(const BiasActivationBackwardArgs& args);
void check_args(const LayerNormArgs& args);
void check_args(const LayerNormBackwardArgs& args);
// Every tensor's spans hold its numel; all share param_type, lr, betas, eps and step.
void check_args(const std::vector<AdamArgs>& tensors);

// The GELU of GPT-2 (gelu_new; PyTorch's gelu(approximate="tanh")):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and its derivative.
inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

}  // namespace prefetchlab::gpu
