#include "core/model/module_costs.hpp"

#include <stdexcept>

namespace prefetchlab::core {
namespace {

constexpr std::int64_t kFp32Bytes = 4;

// The same over the s^2 scores: `per_position` elements per token per key position.
KernelSpec scores_kernel(std::string op, std::int64_t per_position, std::int64_t bytes_per_element,
                         std::int64_t flops_per_element, int backward_kernels, double backward_bytes_factor) {
  KernelSpec k = memory_kernel(std::move(op), 0, 0, 0, backward_kernels, backward_bytes_factor);
  k.flops.per_token_per_position = flops_per_element * per_position;
  k.bytes.per_token_per_position = bytes_per_element * per_position;
  return k;
}

ModuleCosts of(std::vector<KernelSpec> kernels) {
  ModuleCosts c;
  c.kernels = std::move(kernels);
  return c;
}

}  // namespace

KernelSpec memory_kernel(std::string op, std::int64_t elements, std::int64_t bytes_per_element,
                         std::int64_t flops_per_element, int backward_kernels, double backward_bytes_factor) {
  KernelSpec k;
  k.op = std::move(op);
  k.kind = KernelKind::kMemory;
  k.flops.per_token = flops_per_element * elements;
  k.bytes.per_token = bytes_per_element * elements;
  k.backward_kernels = backward_kernels;
  k.backward_flops_factor = backward_kernels > 0 ? 1.0 : 0.0;
  k.backward_bytes_factor = backward_bytes_factor;
  return k;
}

const char* kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kGemm: return "gemm";
    case KernelKind::kAttention: return "attention";
    case KernelKind::kMemory: return "memory";
  }
  throw std::logic_error("kernel_kind_name: unknown KernelKind");
}

const char* attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kEager: return "eager";
    case AttentionImpl::kSdpa: return "sdpa";
    case AttentionImpl::kFlash: return "flash";
    case AttentionImpl::kFlash3: return "flash3";
  }
  throw std::logic_error("attention_impl_name: unknown AttentionImpl");
}

bool is_flash_attn_package(AttentionImpl impl) {
  return impl == AttentionImpl::kFlash || impl == AttentionImpl::kFlash3;
}

ModuleCosts ModuleCosts::saving(std::int64_t per_token_bytes,
                                std::int64_t per_token_per_position_bytes) const {
  ModuleCosts out = *this;
  out.activation_bytes += TokenScaled{0, per_token_bytes, per_token_per_position_bytes};
  return out;
}

ModuleCosts operator+(ModuleCosts a, const ModuleCosts& b) {
  a.kernels.insert(a.kernels.end(), b.kernels.begin(), b.kernels.end());
  a.activation_bytes += b.activation_bytes;
  return a;
}

ModuleCosts token_share(const ModuleCosts& costs, std::int64_t num, std::int64_t den) {
  if (den <= 0 || num < 0) throw std::logic_error("token_share: bad share");
  auto scale = [&](TokenScaled t) {
    t.per_token = t.per_token * num / den;
    t.per_token_per_position = t.per_token_per_position * num / den;
    return t;
  };
  ModuleCosts out = costs;
  for (KernelSpec& k : out.kernels) {
    k.flops = scale(k.flops);
    k.bytes = scale(k.bytes);
    k.gemm_volume = scale(k.gemm_volume);
  }
  out.activation_bytes = scale(out.activation_bytes);
  return out;
}

ModuleCosts linear_costs(std::int64_t in_features, std::int64_t out_features, bool bias,
                         std::int64_t element_bytes) {
  KernelSpec k;
  k.op = bias ? "addmm" : "mm";
  k.kind = KernelKind::kGemm;
  k.flops.per_token = 2 * in_features * out_features;
  const std::int64_t weight_numel = in_features * out_features + (bias ? out_features : 0);
  k.bytes.fixed = weight_numel * element_bytes;
  k.bytes.per_token = (in_features + out_features) * element_bytes;
  k.gemm_volume.per_token = in_features * out_features;
  k.gemm_n = out_features;
  k.gemm_k = in_features;
  k.backward_kernels = 2;  // dgrad, wgrad (the bias gradient's reduction is fused or tiny)
  k.backward_flops_factor = 2.0;
  k.backward_bytes_factor = 2.0;
  return of({k});
}

ModuleCosts linear_per_sequence_costs(std::int64_t in_features, std::int64_t out_features,
                                      std::int64_t element_bytes) {
  ModuleCosts c = linear_costs(in_features, out_features, true, element_bytes);
  KernelSpec& k = c.kernels.front();
  k.flops = TokenScaled{2 * in_features * out_features, 0, 0};
  k.bytes.per_token = 0;
  k.gemm_volume = TokenScaled{in_features * out_features, 0, 0};
  return c;
}

ModuleCosts embedding_costs(std::int64_t dim, std::int64_t element_bytes) {
  return of({memory_kernel("embedding", dim, 2 * element_bytes, 0, 3, 1.0)});  // row read + write
}

ModuleCosts layer_norm_costs(std::int64_t dim, std::int64_t element_bytes) {
  KernelSpec k = memory_kernel("native_layer_norm", dim, 2 * element_bytes, 5, 2, 2.0);
  k.bytes.fixed = 2 * dim * element_bytes;  // weight + bias
  return of({k});
}

ModuleCosts rms_norm_costs(std::int64_t dim, std::int64_t element_bytes) {
  const std::int64_t e = element_bytes;
  const std::int64_t f = kFp32Bytes;
  // Per token: a d-wide fp32 tensor through pow and mul, one fp32 scalar through + eps and rsqrt.
  // Backward (autograd through each op): to's is a cast back; pow's is 2*x*grad; mean's expands
  // the gradient; mul's is a product per input plus the sum over d for the rsqrt branch and the
  // accumulation of x's two gradients; the weight product's is a product and a sum over tokens.
  KernelSpec weight_mul = memory_kernel("rms_norm.mul_weight", dim, 3 * e, 1, 3, 2.0);
  weight_mul.bytes.fixed = dim * e;
  return of({memory_kernel("rms_norm.to_fp32", dim, e + f, 0, 1, 1.0),
             memory_kernel("rms_norm.pow", dim, 2 * f, 1, 2, 2.0),
             memory_kernel("rms_norm.mean", dim, f, 1, 1, 1.0),
             memory_kernel("rms_norm.add_eps", 1, 2 * f, 1, 1, 1.0),
             memory_kernel("rms_norm.rsqrt", 1, 2 * f, 1, 1, 1.5),
             memory_kernel("rms_norm.mul", dim, 2 * f, 1, 4, 3.5),
             memory_kernel("rms_norm.to_dtype", dim, f + e, 0, 1, 1.0),
             weight_mul});
}

ModuleCosts residual_add_costs(std::int64_t elements, std::int64_t element_bytes) {
  return of({memory_kernel("add", elements, 3 * element_bytes, 1, 1, 1.0)});
}

ModuleCosts product_costs(std::int64_t elements, std::int64_t element_bytes) {
  return of({memory_kernel("mul", elements, 3 * element_bytes, 1, 2, 2.0)});
}

ModuleCosts activation_costs(const std::string& op, std::int64_t elements, std::int64_t flops_per_element,
                             std::int64_t element_bytes) {
  return of({memory_kernel(op, elements, 2 * element_bytes, flops_per_element, 1, 1.5)});
}

ModuleCosts dropout_costs(std::int64_t elements, std::int64_t element_bytes) {
  return of({memory_kernel("native_dropout", elements, 2 * element_bytes + 1, 2, 1, 1.0)});
}

ModuleCosts attention_dropout_costs(std::int64_t heads, std::int64_t element_bytes) {
  return of({scores_kernel("scores.native_dropout", heads, 2 * element_bytes + 1, 2, 1, 1.0)});
}

ModuleCosts copy_costs(const std::string& op, std::int64_t read_elements, std::int64_t write_elements,
                       std::int64_t element_bytes) {
  KernelSpec k = memory_kernel(op, 0, 0, 0, 1, 1.0);
  k.bytes.per_token = (read_elements + write_elements) * element_bytes;
  return of({k});
}

ModuleCosts rotary_costs(const std::string& tensor, std::int64_t elements, std::int64_t element_bytes) {
  const std::int64_t e = element_bytes;
  const std::string p = "rotary." + tensor + ".";
  // cos and sin are one head_dim row per token, broadcast over heads: their reads are left out.
  // Backward: a product by cos and by sin; cat's gradient is two slices (each a zero-fill and a
  // copy), neg's a negation, and x's three uses accumulate (two adds).
  return of({memory_kernel(p + "mul_cos", elements, 2 * e, 1, 1, 1.0),
             memory_kernel(p + "neg", elements, e, 0, 1, 1.0),  // half the tensor in, half out
             memory_kernel(p + "cat", elements, 2 * e, 0, 4, 2.0),
             memory_kernel(p + "mul_sin", elements, 2 * e, 1, 1, 1.0),
             memory_kernel(p + "add", elements, 3 * e, 1, 2, 2.0)});
}

ModuleCosts attention_core_costs(AttentionImpl impl, const AttentionShape& shape, std::int64_t element_bytes) {
  const std::int64_t e = element_bytes;
  const std::int64_t h = shape.hidden;
  const std::int64_t a = shape.heads;
  if (impl != AttentionImpl::kEager) {
    KernelSpec k;
    k.op = impl == AttentionImpl::kFlash3 ? "flash_attn_3" : impl == AttentionImpl::kFlash ? "flash_attn" : "sdpa.flash";
    k.kind = KernelKind::kAttention;
    k.attention_kernel = impl == AttentionImpl::kFlash3 ? AttentionKernel::kFlash3 : AttentionKernel::kFlash2;
    const std::int64_t full = 4 * h;  // QK^T + PV per token per key position
    k.flops.per_token_per_position = shape.causal ? full / 2 : full;
    k.bytes.per_token = (2 * h + 2 * shape.kv_dim) * e;  // Q, K, V in; O out
    // One recomputing backward kernel plus its preprocessing (rowsum(dO * O)) and the fp32 dQ
    // accumulator's conversion (FlashAttention-3's backward has the same three); it reads Q, K, V, O, dO and writes dQ, dK, dV.
    k.backward_kernels = 3;
    k.backward_flops_factor = 2.5;
    k.backward_bytes_factor = 2.5;
    ModuleCosts c = of({k});
    // HF's sdpa path transposes the output back to (b, s, heads, d) and makes it contiguous;
    // flash-attn works in that layout already.
    if (impl == AttentionImpl::kSdpa) c = c + copy_costs("transpose.contiguous", h, h, e);
    return c;
  }
  // Eager. QK^T and PV: batched GEMMs of (s x d) by (d x s) and (s x s) by (s x d) per head.
  KernelSpec qk;
  qk.op = "bmm.qk";
  qk.kind = KernelKind::kGemm;
  qk.flops.per_token_per_position = 2 * h;
  qk.gemm_volume.per_token_per_position = h;
  qk.bytes.per_token = 2 * h * e;              // Q and K (K at full width after repeat_kv)
  qk.bytes.per_token_per_position = a * e;     // the scores written
  qk.backward_kernels = 2;
  qk.backward_flops_factor = 2.0;
  qk.backward_bytes_factor = 2.0;
  KernelSpec pv = qk;
  pv.op = "bmm.pv";
  pv.bytes.per_token = 2 * h * e;              // V in, O out
  pv.bytes.per_token_per_position = a * e;     // the probabilities read
  ModuleCosts c = of({qk, scores_kernel("scores.scale", a, 2 * e, 1, 1, 1.0)});
  // An added mask's gradient passes through; `where`'s is one more kernel.
  c = c + of({scores_kernel(shape.mask_by_where ? "scores.where_mask" : "scores.add_mask", a, 2 * e, 1,
                            shape.mask_by_where ? 1 : 0, 1.0)});
  if (shape.softmax_in_fp32) {
    c = c + of({scores_kernel("softmax.fp32", a, e + kFp32Bytes, 5, 1, 2.0),  // bwd reads y, dy
                scores_kernel("softmax.to_dtype", a, kFp32Bytes + e, 0, 1, 1.0)});
  } else {
    c = c + of({scores_kernel("softmax", a, 2 * e, 5, 1, 1.5)});
  }
  if (shape.dropout) c = c + attention_dropout_costs(a, e);
  c = c + of({pv});
  return c + copy_costs("transpose.contiguous", h, h, e);
}

ModuleCosts cross_entropy_costs(std::int64_t vocab_size, std::int64_t logits_bytes, bool upcast_and_shift) {
  const std::int64_t v = vocab_size;
  const std::int64_t c = upcast_and_shift ? kFp32Bytes : logits_bytes;
  std::vector<KernelSpec> kernels;
  if (upcast_and_shift) {
    kernels.push_back(memory_kernel("loss.to_fp32", v, logits_bytes + c, 0, 1, 1.0));
    // The slice's gradient is a zero-fill of the full logits and a copy into it.
    kernels.push_back(memory_kernel("loss.shift_contiguous", v, 2 * c, 0, 2, 1.5));
  }
  // log_softmax reads the logits, writes the log-probabilities; backward also zero-fills the
  // nll gradient: two kernels.
  kernels.push_back(memory_kernel("loss.log_softmax", v, 2 * c, 5, 2, 2.0));
  kernels.push_back(memory_kernel("loss.nll", 1, c, 1, 1, 1.0));
  ModuleCosts costs = of(std::move(kernels));
  costs.activation_bytes.per_token = v * c;
  return costs;
}

}  // namespace prefetchlab::core
