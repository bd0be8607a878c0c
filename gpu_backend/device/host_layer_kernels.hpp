#pragma once
// The host device's fused transformer-layer kernels and multi-tensor Adam on plain host memory:
// the reference the CUDA kernels are tested against (tests/gpu_backend/cuda_kernels_test.cpp).
// Operands in bf16 or fp32, arithmetic in fp32 with row sums in fp64 (at least as accurate as
// the GPU's fp32 tree sums). Single-threaded: each runs on one stream's worker thread.
#include <vector>

#include "gpu_backend/device/adam_chunk_plan.hpp"
#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu::host {

void run_bias_activation(const BiasActivationArgs& args);
void run_bias_activation_backward(const BiasActivationBackwardArgs& args);
void run_layer_norm(const LayerNormArgs& args);
void run_layer_norm_backward(const LayerNormBackwardArgs& args);
// Walks plan_adam_chunks as the CUDA launches do, one run_adam per chunk.
void run_multi_tensor_adam(const std::vector<AdamArgs>& tensors, const AdamChunkLimits& limits = {});

// GELU (tanh approximation) and its derivative, as the kernels compute them.
float gelu_tanh(float x);
float gelu_tanh_derivative(float x);

}  // namespace prefetchlab::gpu::host
