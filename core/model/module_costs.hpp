#pragma once
// Forward cost formulas for the building blocks of transformer modules (own work only).
// FLOPs count multiply and add separately (a GEMM is 2*in*out per token); bytes are
// device-memory traffic: weights read once per forward (`fixed`), activations read and
// written per token. Activation bytes saved for backward are set by the builders, which
// follow Korthikanti et al. 2022 (arXiv:2205.05198).
#include <cstdint>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

struct ModuleCosts {
  TokenScaled forward_flops;
  TokenScaled forward_bytes;
  TokenScaled activation_bytes;

  // A copy that also saves these bytes for backward.
  ModuleCosts saving(std::int64_t per_token_bytes, std::int64_t per_token_per_position_bytes = 0) const;
};

ModuleCosts operator+(ModuleCosts a, const ModuleCosts& b);

// nn.Linear / HF Conv1D: 2*in*out FLOPs per token (Narayanan et al. 2021, arXiv:2104.04473); the
// bias add is fused into the GEMM epilogue and not counted, so linear FLOPs == 2 x matmul params.
ModuleCosts linear_costs(std::int64_t in_features, std::int64_t out_features, bool bias,
                         std::int64_t element_bytes);
// nn.Embedding: a gather, no FLOPs; reads only the looked-up rows, so no fixed weight read.
ModuleCosts embedding_costs(std::int64_t dim, std::int64_t element_bytes);
// LayerNorm (mean, variance, normalise, scale, shift: ~5 FLOPs/element) or RMSNorm
// (square, mean, rsqrt-scale, weight: ~4 FLOPs/element); reads input and weights, writes output.
ModuleCosts layer_norm_costs(std::int64_t dim, std::int64_t element_bytes);
ModuleCosts rms_norm_costs(std::int64_t dim, std::int64_t element_bytes);
// Elementwise op over `elements` per token reading `inputs` tensors and writing one
// (activations, residual adds, the SwiGLU product).
ModuleCosts elementwise_costs(std::int64_t elements, std::int64_t flops_per_element,
                              std::int64_t inputs, std::int64_t element_bytes);
// nn.Dropout in training: draws a mask (1 byte/element) and scales (~2 FLOPs/element).
ModuleCosts dropout_costs(std::int64_t elements, std::int64_t element_bytes);
// The sdpa core: QK^T 2*s*h + AV 2*s*h FLOPs per token (Narayanan et al. 2021: 4*b*s^2*h per layer;
// GQA does not change it). Causal models: the kernel skips masked blocks, about half.
// Fused kernels stream Q, K, V in and the output out; the s^2 scores stay on chip.
ModuleCosts attention_core_costs(std::int64_t hidden, std::int64_t kv_dim, bool causal,
                                 std::int64_t element_bytes);

// Training loss over the logits (in the top module's forward when labels are given): an
// upcast/read of the logits, log-softmax (~5 FLOPs/element) and NLL in `compute_bytes`
// precision; the log-softmax output (V per token) is what backward keeps.
ModuleCosts cross_entropy_costs(std::int64_t vocab_size, std::int64_t logits_bytes,
                                std::int64_t compute_bytes);

}  // namespace prefetchlab::core
