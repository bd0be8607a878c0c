#pragma once
// The model as ZeRO-3 sees it: every nn.Module whose hooks fire, in execution order, each with
// its *direct* parameters. Parameters live in one table (index = ds_id, i.e. creation order
// under zero.Init) so a tied weight (GPT-2's wte / lm_head) is one parameter used by two modules.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/kernel_spec.hpp"
#include "core/model/token_scaled.hpp"

namespace prefetchlab::core {

enum class DType { kBF16, kFP16, kFP32 };
std::int64_t dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);

struct ParamSpec {
  std::string name;  // fully qualified, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::int64_t numel = 0;
  DType dtype = DType::kBF16;
  // The GEMM shape this weight takes part in (in_features x out_features); 0 for non-GEMM
  // parameters (norms, biases, embeddings). Used by compute models and the real backend.
  std::int64_t gemm_in = 0;
  std::int64_t gemm_out = 0;
};

struct ModuleSpec {
  std::string name;        // fully qualified; the root is ""
  // The name to show people (traces, errors): "(root)" for the root's empty name.
  std::string display_name() const { return name.empty() ? std::string("(root)") : name; }
  std::string class_name;  // HF class, e.g. "LlamaDecoderLayer"
  int depth = 0;           // root = 0
  int parent = -1;         // index into ModelSpec::modules; -1 for the root
  std::vector<int> children;     // in execution order
  std::vector<int> param_ids;    // direct parameters (indices into ModelSpec::params)
  // This module's *own* forward work, excluding its children: the kernels PyTorch eager runs
  // for it, in launch order, each with what autograd runs for it in backward.
  std::vector<KernelSpec> kernels;
  // Their sums.
  TokenScaled forward_flops;        // floating-point operations
  TokenScaled forward_bytes;        // device-memory traffic (weights read, activations in/out)
  TokenScaled activation_bytes;     // saved for backward (16-bit activations as in Korthikanti)
  // Whether DeepSpeed's post-backward hook fires for this module. DeepSpeed wraps the module's
  // forward *inputs* in an autograd function whose backward is that hook, and only inputs that
  // require grad are wrapped (deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py,
  // PostBackwardFunctionModule via apply_to_tensors_only). A module fed only token or position
  // ids (an embedding, and every module above one: the model wrappers and the root) never gets
  // it, so its parameters are not released in backward but by the optimizer step's
  // release-all. Recorded on real DeepSpeed ZeRO-3 (GPT-2 small, 0.19.6 and 0.14.5).
  bool post_backward_hook_fires = true;
  // ZeRO-3 leaf modules (zero.leaf_modules, DeepSpeed's set_z3_leaf_modules): a leaf's hooks
  // fetch and release its whole subtree's parameters (its param_ids then hold them all); the
  // modules below it get no hooks (core/moe/leaf_modules.hpp).
  bool z3_leaf = false;
  bool z3_hooks = true;  // false below a leaf
};

struct ModelSpec {
  std::string name;           // e.g. "llama-2-7b"
  std::string architecture;   // gpt2 | bert | llama, or a config.json's model_type
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;       // == num_heads unless grouped-query attention
  std::int64_t intermediate_size = 0;  // MLP width
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;      // longest sequence the model accepts
  bool causal = true;
  // Probability of the dropout on the attention probabilities (config.json's attention_dropout,
  // attn_pdrop): FlashAttention-3 has none, so flash3 refuses a model that trains with it.
  double attention_dropout = 0;
  // Mixture of experts (Mixtral, Qwen2-MoE): experts per MoE block and experts each token is
  // routed to; 0 for a dense model.
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 0;
  std::vector<ModuleSpec> modules;  // pre-order == execution order of forward pre-hooks
  std::vector<ParamSpec> params;    // index == ds_id

  // Unique parameters (a tied weight counts once).
  std::int64_t total_numel() const;
  // Sum over modules of the direct numel (a tied weight counts in both modules).
  std::int64_t direct_numel(int module_index) const;
  std::int64_t forward_flops(std::int64_t micro_batch, std::int64_t seq_len) const;
};

}  // namespace prefetchlab::core
