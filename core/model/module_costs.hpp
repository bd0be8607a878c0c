#pragma once
// The kernels PyTorch eager mode runs for the building blocks of transformer modules (a module's
// own work only), forward and backward, and what each saves for backward.
//
// Each block is decomposed the way ATen runs it, one KernelSpec per launched kernel, since eager
// mode launches and pays memory traffic per op: HF's LlamaRMSNorm is eight kernels moving ~38
// bytes per element in bf16, where a fused norm would move 4. FLOPs count multiply and add
// separately (a GEMM is 2*in*out per token); bytes are device-memory traffic: weights read once
// per forward (`fixed`), activations read and written per token, s^2 terms per position.
// Activation bytes saved for backward are set by the builders, in the manner of Korthikanti et
// al. 2022 (arXiv:2205.05198).
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/kernel_spec.hpp"
#include "core/model/token_scaled.hpp"

namespace prefetchlab::core {

struct ModuleCosts {
  std::vector<KernelSpec> kernels;  // in launch order
  TokenScaled activation_bytes;

  // A copy that also saves these bytes for backward.
  ModuleCosts saving(std::int64_t per_token_bytes, std::int64_t per_token_per_position_bytes = 0) const;
};

// A memory-bound kernel over `elements` per token moving `bytes_per_element` and computing
// `flops_per_element` each; backward: `backward_kernels` kernels moving backward_bytes_factor
// times the forward's bytes (0 kernels: the gradient passes through).
KernelSpec memory_kernel(std::string op, std::int64_t elements, std::int64_t bytes_per_element,
                         std::int64_t flops_per_element, int backward_kernels, double backward_bytes_factor);

// Both blocks' kernels, a's first.
ModuleCosts operator+(ModuleCosts a, const ModuleCosts& b);

// The same work done on a share num/den of the tokens (an MoE expert that receives on average
// top_k / num_experts of them): per-token and per-position terms scale, fixed ones (the weight
// read) do not.
ModuleCosts token_share(const ModuleCosts& costs, std::int64_t num, std::int64_t den);

// nn.Linear / HF Conv1D: one GEMM (addmm with a bias, mm without), 2*in*out FLOPs per token
// (Narayanan et al. 2021, arXiv:2104.04473); the bias add is fused into the GEMM epilogue.
// Backward: grad input and grad weight, each a GEMM of the forward's size.
ModuleCosts linear_costs(std::int64_t in_features, std::int64_t out_features, bool bias,
                         std::int64_t element_bytes);
// A Linear applied to one row per sequence (BERT's pooler): its cost does not grow with the
// sequence, so it is charged once, as for b = 1.
ModuleCosts linear_per_sequence_costs(std::int64_t in_features, std::int64_t out_features,
                                      std::int64_t element_bytes);
// nn.Embedding: a gather of the looked-up rows (no fixed weight read); backward sorts the ids
// and accumulates rows (embedding_dense_backward, three kernels).
ModuleCosts embedding_costs(std::int64_t dim, std::int64_t element_bytes);
// nn.LayerNorm: ATen's fused native_layer_norm (~5 FLOPs/element); backward: the input gradient
// and the weight/bias gradients, two kernels.
ModuleCosts layer_norm_costs(std::int64_t dim, std::int64_t element_bytes);
// HF's LlamaRMSNorm as eager runs it (modeling_llama.py; torchtitan's default RMSNorm is the same
// ops): to(fp32), pow(2), mean, + eps, rsqrt, mul, to(dtype), * weight: eight kernels.
ModuleCosts rms_norm_costs(std::int64_t dim, std::int64_t element_bytes);
// A residual add of two `elements`-wide tensors; its backward is the gradient accumulation where
// the residual stream branched.
ModuleCosts residual_add_costs(std::int64_t elements, std::int64_t element_bytes);
// An elementwise product of two tensors (SwiGLU's act(gate) * up); backward: one product per input.
ModuleCosts product_costs(std::int64_t elements, std::int64_t element_bytes);
// An activation (SiLU ~4, GELU ~8 FLOPs/element): reads its input, writes its output; backward
// reads the saved input and the output gradient (silu_backward, gelu_backward).
ModuleCosts activation_costs(const std::string& op, std::int64_t elements, std::int64_t flops_per_element,
                             std::int64_t element_bytes);
// nn.Dropout in training (native_dropout): writes the output and a bool mask; backward applies it.
ModuleCosts dropout_costs(std::int64_t elements, std::int64_t element_bytes);
// Dropout over the s^2 attention probabilities (`heads` per token per key position), when eager
// attention calls its dropout module.
ModuleCosts attention_dropout_costs(std::int64_t heads, std::int64_t element_bytes);
// A copy of `read_elements` into `write_elements` per token (a transpose's .contiguous(), GQA's
// repeat_kv expansion); backward copies (or sums) back.
ModuleCosts copy_costs(const std::string& op, std::int64_t read_elements, std::int64_t write_elements,
                       std::int64_t element_bytes);
// HF's apply_rotary_pos_emb on one `elements`-wide tensor per token: q*cos, rotate_half (neg and
// cat), *sin, add: five kernels.
ModuleCosts rotary_costs(const std::string& tensor, std::int64_t elements, std::int64_t element_bytes);

// The attention core between the q/k/v projections and the output projection, as `impl` runs it.
struct AttentionShape {
  std::int64_t hidden = 0;   // query width (heads * head_dim)
  std::int64_t kv_dim = 0;   // key/value width (kv_heads * head_dim)
  std::int64_t heads = 0;
  bool causal = true;
  bool dropout = false;          // attention dropout in training (GPT-2, BERT: p = 0.1)
  bool softmax_in_fp32 = false;  // eager softmax upcast to fp32, then cast back (Llama)
  // Eager masking: `where` on a bool mask (GPT-2) or an added float mask (Llama, BERT).
  bool mask_by_where = false;
};
// sdpa / flash: one fused kernel, QK^T + PV FLOPs (4*s*hidden per token per key position,
// Narayanan et al. 2021; half of that when causal, since the kernel skips masked blocks); its
// backward recomputes the scores (~2.5x the forward FLOPs: 5 vs 2 matmuls, Dao et al. 2022,
// arXiv:2205.14135). sdpa is followed by the transpose(1, 2).contiguous() HF's sdpa path does.
// eager: batched QK^T and PV GEMMs over all s^2 positions (no causal skipping), with scale,
// mask, softmax (and its fp32 casts), dropout as memory-bound kernels over the s^2 scores.
// Saved for backward: see the builders (eager keeps the s^2 probabilities).
ModuleCosts attention_core_costs(AttentionImpl impl, const AttentionShape& shape, std::int64_t element_bytes);

// Causal-LM / MLM loss over the logits (in the top module's forward when labels are given).
// `upcast_and_shift`: HF's ForCausalLMLoss (4.46): logits.float(), the shift's .contiguous()
// copy, then log_softmax (~5 FLOPs/element) and nll_loss in fp32; otherwise (BERT's MLM loss)
// log_softmax and nll_loss in the logits' dtype. The log-softmax output is what backward keeps.
ModuleCosts cross_entropy_costs(std::int64_t vocab_size, std::int64_t logits_bytes, bool upcast_and_shift);

}  // namespace prefetchlab::core
