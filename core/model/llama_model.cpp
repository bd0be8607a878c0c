// LlamaForCausalLM as in Hugging Face transformers v4.46.3 (models/llama/modeling_llama.py,
// attn_implementation eager | sdpa | flash_attention_2, pretraining_tp = 1).
#include <string>

#include "core/model/model_builders.hpp"
#include "core/model/module_tree_builder.hpp"

namespace prefetchlab::core {

ModelSpec build_llama_model(const ModelConfig& config, const std::string& name, DType dtype,
                            AttentionImpl attention) {
  ModelSpec spec = model_spec_header(config, name, true);

  ModuleTreeBuilder b(spec, dtype);
  const std::int64_t e = b.element_bytes();
  const std::int64_t h = config.hidden_size;
  const std::int64_t f = config.intermediate_size;
  const std::int64_t v = config.vocab_size;
  const std::int64_t a = config.num_heads;
  const std::int64_t head_dim = h / a;
  const std::int64_t kv_dim = config.num_kv_heads * head_dim;
  const bool bias = config.bias;  // LlamaConfig attention_bias / mlp_bias
  auto layer_prefix = [](std::int64_t i) { return "model.layers." + std::to_string(i); };

  // --- Parameters in __init__ creation order (= ds_id under zero.Init) ---
  // LlamaModel.__init__: embed_tokens, layers, norm, rotary_emb (no parameters).
  b.add_param("model.embed_tokens.weight", v * h, config.tie_embeddings ? h : 0,
              config.tie_embeddings ? v : 0);
  auto add_linear = [&](const std::string& module, std::int64_t in, std::int64_t out, bool with_bias) {
    b.add_param(module + ".weight", in * out, in, out);
    if (with_bias) b.add_param(module + ".bias", out);
  };
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    // LlamaDecoderLayer.__init__: self_attn, mlp, input_layernorm, post_attention_layernorm.
    const std::string p = layer_prefix(i);
    add_linear(p + ".self_attn.q_proj", h, h, bias);
    add_linear(p + ".self_attn.k_proj", h, kv_dim, bias);
    add_linear(p + ".self_attn.v_proj", h, kv_dim, bias);
    add_linear(p + ".self_attn.o_proj", h, h, bias);
    // LlamaMLP.__init__: gate_proj, up_proj, down_proj, act_fn.
    add_linear(p + ".mlp.gate_proj", h, f, bias);
    add_linear(p + ".mlp.up_proj", h, f, bias);
    add_linear(p + ".mlp.down_proj", f, h, bias);
    b.add_param(p + ".input_layernorm.weight", h);
    b.add_param(p + ".post_attention_layernorm.weight", h);
  }
  b.add_param("model.norm.weight", h);
  // lm_head is created last; when tied, HF's tie_weights() makes it embed_tokens.weight.
  if (!config.tie_embeddings) b.add_param("lm_head.weight", h * v, h, v);

  // --- Modules in forward execution order ---
  // Activation bytes: our estimate in the manner of Korthikanti et al. 2022 (no published
  // equivalent for Llama blocks; bf16, no dropout), itemised per tensor and charged to the module
  // that saves it. With flash-attn the terms sum to sbh(14 + 4kv/a) + 6sbf + 4asb; sdpa keeps
  // K and V expanded to all heads (4 sbh instead of 4 sbh kv/a).
  auto ids = [&](const std::string& module, bool with_bias) {
    std::vector<int> out{b.param(module + ".weight")};
    if (with_bias) out.push_back(b.param(module + ".bias"));
    return out;
  };
  auto linear = [&](const std::string& module, std::int64_t in, std::int64_t out, std::int64_t saved) {
    b.leaf(module, "Linear", linear_costs(in, out, bias, e).saving(saved), ids(module, bias));
  };

  // Root own work: the causal-LM loss; HF's ForCausalLMLoss upcasts the logits to fp32.
  b.begin("", "LlamaForCausalLM", cross_entropy_costs(v, e, true));
  b.begin("model", "LlamaModel");
  b.leaf("model.embed_tokens", "Embedding", embedding_costs(h, e),
         {b.param("model.embed_tokens.weight")});
  // In 4.46 RoPE cos/sin are computed once here and passed to every layer: the position ids'
  // outer product with inv_freq, cat, cos, sin (per token: head_dim angles, cos and sin written).
  b.leaf("model.rotary_emb", "LlamaRotaryEmbedding",
         activation_costs("rotary_emb.cos_sin", head_dim, 3, e));
  // Attention as `attention` runs it. sdpa in 4.46 (LlamaSdpaAttention) expands K and V to all
  // heads with repeat_kv before calling sdpa; eager does the same before its matmuls; flash-attn
  // takes the grouped heads as they are.
  const bool expand_kv = kv_dim != h && attention != AttentionImpl::kFlash;
  const std::int64_t kv_width = expand_kv ? h : kv_dim;
  AttentionShape shape;
  shape.hidden = h;
  shape.kv_dim = kv_width;
  shape.heads = a;
  shape.causal = true;
  shape.softmax_in_fp32 = true;  // softmax(..., dtype=torch.float32).to(query.dtype)
  // Saved by the attention core: sdpa/flash keep Q, K, V, the output and the softmax's
  // log-sum-exp (4 bytes per head per token); eager keeps Q and K for QK^T, the fp32 softmax
  // output (4as^2b) for its backward, and the cast probabilities (2as^2b) and V for PV.
  const std::int64_t saved_per_token = attention == AttentionImpl::kEager
                                           ? 2 * h + 4 * kv_width
                                           : 2 * h + 4 * kv_width + 2 * h + 4 * a;
  const std::int64_t saved_per_position = attention == AttentionImpl::kEager ? 6 * a : 0;
  // model.layers (ModuleList) is only iterated, never called: its hooks never fire.
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = layer_prefix(i);
    // Own work: the two residual adds.
    b.begin(p, "LlamaDecoderLayer", residual_add_costs(h, e) + residual_add_costs(h, e));
    b.leaf(p + ".input_layernorm", "LlamaRMSNorm", rms_norm_costs(h, e).saving(2 * h),
           {b.param(p + ".input_layernorm.weight")});
    // Own work: RoPE on q and k, repeat_kv copies for GQA, the attention core.
    ModuleCosts attn = rotary_costs("q", h, e) + rotary_costs("k", kv_dim, e);
    if (expand_kv) {
      attn = attn + copy_costs("repeat_kv.k", kv_dim, h, e) + copy_costs("repeat_kv.v", kv_dim, h, e);
    }
    attn = attn + attention_core_costs(attention, shape, e);
    // The attention module's own rotary_emb (registered in 4.46 for backward compatibility)
    // only runs when position_embeddings is None, which LlamaModel never does: left out.
    b.begin(p + ".self_attn", attention == AttentionImpl::kEager ? "LlamaAttention"
                              : attention == AttentionImpl::kSdpa ? "LlamaSdpaAttention"
                                                                  : "LlamaFlashAttention2",
            attn.saving(saved_per_token, saved_per_position));
    linear(p + ".self_attn.q_proj", h, h, 2 * h);  // saves the shared q/k/v input (2sbh)
    linear(p + ".self_attn.k_proj", h, kv_dim, 0);
    linear(p + ".self_attn.v_proj", h, kv_dim, 0);
    linear(p + ".self_attn.o_proj", h, h, 2 * h);  // o_proj input (2sbh)
    b.end();
    b.leaf(p + ".post_attention_layernorm", "LlamaRMSNorm", rms_norm_costs(h, e).saving(2 * h),
           {b.param(p + ".post_attention_layernorm.weight")});
    // forward: down_proj(act_fn(gate_proj(x)) * up_proj(x)) -> gate, act, up, down.
    // Own work: the product; it keeps up_proj's output (2sbf).
    b.begin(p + ".mlp", "LlamaMLP", product_costs(f, e).saving(2 * f));
    linear(p + ".mlp.gate_proj", h, f, 2 * h);  // saves the shared gate/up input (2sbh)
    b.leaf(p + ".mlp.act_fn", activation_function_class(config.activation),
           activation_function_costs(config.activation, f, e));
    linear(p + ".mlp.up_proj", h, f, 0);
    linear(p + ".mlp.down_proj", f, h, 2 * f);  // the SiLU*up product (2sbf)
    b.end();
    b.end();
  }
  b.leaf("model.norm", "LlamaRMSNorm", rms_norm_costs(h, e).saving(2 * h), {b.param("model.norm.weight")});
  b.end();
  const int head_weight = b.param(config.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  b.leaf("lm_head", "Linear", linear_costs(h, v, false, e).saving(2 * h), {head_weight});
  b.end();
  return spec;
}

}  // namespace prefetchlab::core
