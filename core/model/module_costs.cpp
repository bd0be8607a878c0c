#include "core/model/module_costs.hpp"

namespace prefetchlab::core {

ModuleCosts ModuleCosts::saving(std::int64_t per_token_bytes,
                                std::int64_t per_token_per_position_bytes) const {
  ModuleCosts out = *this;
  out.activation_bytes += TokenScaled{0, per_token_bytes, per_token_per_position_bytes};
  return out;
}

ModuleCosts operator+(ModuleCosts a, const ModuleCosts& b) {
  a.forward_flops += b.forward_flops;
  a.forward_bytes += b.forward_bytes;
  a.activation_bytes += b.activation_bytes;
  return a;
}

ModuleCosts linear_costs(std::int64_t in_features, std::int64_t out_features, bool bias,
                         std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = 2 * in_features * out_features;
  const std::int64_t weight_numel = in_features * out_features + (bias ? out_features : 0);
  c.forward_bytes.fixed = weight_numel * element_bytes;
  c.forward_bytes.per_token = (in_features + out_features) * element_bytes;
  return c;
}

ModuleCosts embedding_costs(std::int64_t dim, std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_bytes.per_token = 2 * dim * element_bytes;  // row read + output write
  return c;
}

ModuleCosts layer_norm_costs(std::int64_t dim, std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = 5 * dim;
  c.forward_bytes.fixed = 2 * dim * element_bytes;  // weight + bias
  c.forward_bytes.per_token = 2 * dim * element_bytes;
  return c;
}

ModuleCosts rms_norm_costs(std::int64_t dim, std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = 4 * dim;
  c.forward_bytes.fixed = dim * element_bytes;  // weight only
  c.forward_bytes.per_token = 2 * dim * element_bytes;
  return c;
}

ModuleCosts elementwise_costs(std::int64_t elements, std::int64_t flops_per_element,
                              std::int64_t inputs, std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = flops_per_element * elements;
  c.forward_bytes.per_token = (inputs + 1) * elements * element_bytes;
  return c;
}

ModuleCosts dropout_costs(std::int64_t elements, std::int64_t element_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = 2 * elements;
  c.forward_bytes.per_token = elements * (2 * element_bytes + 1);  // in, out, bool mask
  return c;
}

ModuleCosts attention_core_costs(std::int64_t hidden, std::int64_t kv_dim, bool causal,
                                 std::int64_t element_bytes) {
  ModuleCosts c;
  const std::int64_t full = 4 * hidden;  // QK^T + AV per token per key position
  c.forward_flops.per_token_per_position = causal ? full / 2 : full;
  c.forward_bytes.per_token = (2 * hidden + 2 * kv_dim) * element_bytes;  // Q, K, V in; O out
  return c;
}

ModuleCosts cross_entropy_costs(std::int64_t vocab_size, std::int64_t logits_bytes,
                                std::int64_t compute_bytes) {
  ModuleCosts c;
  c.forward_flops.per_token = 5 * vocab_size;
  // read logits, write log-probs, read them again for the NLL gather
  c.forward_bytes.per_token = vocab_size * (logits_bytes + 2 * compute_bytes);
  c.activation_bytes.per_token = vocab_size * compute_bytes;
  return c;
}

}  // namespace prefetchlab::core
