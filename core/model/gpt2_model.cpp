// GPT2LMHeadModel as in Hugging Face transformers v4.46.3 (models/gpt2/modeling_gpt2.py,
// attn_implementation eager | sdpa | flash_attention_2). Conv1D weights are (in, out) with bias.
#include <string>

#include "core/model/model_builders.hpp"
#include "core/model/module_tree_builder.hpp"

namespace prefetchlab::core {

ModelSpec build_gpt2_model(const ModelConfig& config, const std::string& name, DType dtype,
                           AttentionImpl attention) {
  ModelSpec spec = model_spec_header(config, name, true);

  ModuleTreeBuilder b(spec, dtype);
  const std::int64_t e = b.element_bytes();
  const std::int64_t h = config.hidden_size;
  const std::int64_t f = config.intermediate_size;
  const std::int64_t v = config.vocab_size;
  const std::int64_t a = config.num_heads;
  const bool tied = config.tie_embeddings;
  auto block_prefix = [](std::int64_t i) { return "transformer.h." + std::to_string(i); };

  // --- Parameters in __init__ creation order (= ds_id under zero.Init) ---
  // GPT2Model.__init__: wte, wpe, drop, h, ln_f. The tied wte also feeds the lm_head GEMM.
  b.add_param("transformer.wte.weight", v * h, tied ? h : 0, tied ? v : 0);
  b.add_param("transformer.wpe.weight", config.max_positions * h);
  auto add_conv = [&](const std::string& module, std::int64_t in, std::int64_t out) {
    b.add_param(module + ".weight", in * out, in, out);
    b.add_param(module + ".bias", out);
  };
  auto add_norm = [&](const std::string& module) {
    b.add_param(module + ".weight", h);
    b.add_param(module + ".bias", h);
  };
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    // GPT2Block.__init__: ln_1, attn (c_attn, c_proj), ln_2, mlp (c_fc, c_proj).
    const std::string p = block_prefix(i);
    add_norm(p + ".ln_1");
    add_conv(p + ".attn.c_attn", h, 3 * h);
    add_conv(p + ".attn.c_proj", h, h);
    add_norm(p + ".ln_2");
    add_conv(p + ".mlp.c_fc", h, f);
    add_conv(p + ".mlp.c_proj", f, h);
  }
  add_norm("transformer.ln_f");
  // lm_head is created last; when tied, tie_weights() makes it transformer.wte.weight.
  if (!tied) b.add_param("lm_head.weight", h * v, h, v);

  // --- Modules in forward execution order ---
  // Activation bytes per block: Korthikanti et al. 2022 (arXiv:2205.05198), each tensor charged to
  // the module that saves it; with f = 4h the block totals sbh(34 + 5as/h).
  auto ids = [&](const std::string& module) {
    return std::vector<int>{b.param(module + ".weight"), b.param(module + ".bias")};
  };
  auto conv = [&](const std::string& module, std::int64_t in, std::int64_t out, std::int64_t saved) {
    b.leaf(module, "Conv1D", linear_costs(in, out, true, e).saving(saved), ids(module));
  };
  auto layer_norm = [&](const std::string& module) {
    // Saves its input, 2sbh.
    b.leaf(module, "LayerNorm", layer_norm_costs(h, e).saving(2 * h), ids(module));
  };
  // nn.Dropout: a kernel that saves its mask (sbh bytes) when p > 0; with p = 0 it returns its
  // input (no kernel, nothing saved), but the module is called and its hooks fire.
  auto dropout = [&](const std::string& module, double p) {
    if (p > 0) {
      b.leaf(module, "Dropout", dropout_costs(h, e).saving(h));
    } else {
      b.leaf(module, "Dropout");
    }
  };

  // Root own work: the causal-LM loss (HF's ForCausalLMLoss upcasts logits to fp32).
  b.begin("", "GPT2LMHeadModel", cross_entropy_costs(v, e, true));
  b.begin("transformer", "GPT2Model", residual_add_costs(h, e));  // wte + wpe
  b.leaf("transformer.wte", "Embedding", embedding_costs(h, e), {b.param("transformer.wte.weight")});
  b.leaf("transformer.wpe", "Embedding", embedding_costs(h, e), {b.param("transformer.wpe.weight")});
  dropout("transformer.drop", config.embedding_dropout);
  AttentionShape shape;
  shape.hidden = h;
  shape.kv_dim = h;
  shape.heads = a;
  shape.causal = true;
  shape.mask_by_where = true;  // torch.where(causal_mask, scores, finfo.min)
  const bool eager = attention == AttentionImpl::kEager;
  // transformer.h (ModuleList) is only iterated, never called: its hooks never fire.
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = block_prefix(i);
    b.begin(p, "GPT2Block", residual_add_costs(h, e) + residual_add_costs(h, e));
    layer_norm(p + ".ln_1");
    if (eager) {
      // GPT2Attention._attn: QK^T, / sqrt(d), where-mask, softmax, attn_dropout (a module whose
      // hooks fire), PV. Saved (Korthikanti's accounting): Q and K 4sbh, V 2sbh, softmax output
      // 2as^2b, dropout mask as^2b, dropout output 2as^2b.
      b.begin(p + ".attn", "GPT2Attention", attention_core_costs(attention, shape, e).saving(6 * h, 2 * a));
      conv(p + ".attn.c_attn", h, 3 * h, 2 * h);  // QKV input 2sbh
      if (config.attention_dropout > 0) {
        b.leaf(p + ".attn.attn_dropout", "Dropout", attention_dropout_costs(a, e).saving(0, 3 * a));
      } else {
        b.leaf(p + ".attn.attn_dropout", "Dropout");
      }
    } else {
      // GPT2SdpaAttention / GPT2FlashAttention2 pass attn_dropout.p to the fused kernel and never
      // call attn_dropout. Saved: Q, K, V 6sbh, the output 2sbh, the log-sum-exp 4 bytes per head.
      shape.dropout = config.attention_dropout > 0;
      // Transformers' flash_attention_3 came with its one attention class per model.
      b.begin(p + ".attn", attention == AttentionImpl::kSdpa    ? "GPT2SdpaAttention"
                           : attention == AttentionImpl::kFlash ? "GPT2FlashAttention2"
                                                                : "GPT2Attention",
              attention_core_costs(attention, shape, e).saving(8 * h + 4 * a));
      conv(p + ".attn.c_attn", h, 3 * h, 2 * h);  // QKV input 2sbh
    }
    conv(p + ".attn.c_proj", h, h, 2 * h);      // output-projection input 2sbh
    dropout(p + ".attn.resid_dropout", config.hidden_dropout);
    b.end();
    layer_norm(p + ".ln_2");
    // GPT2MLP.forward: c_fc, act, c_proj, dropout.
    b.begin(p + ".mlp", "GPT2MLP");
    conv(p + ".mlp.c_fc", h, f, 2 * h);  // first-linear input 2sbh
    // ACT2FN[activation_function]: gelu_new by default, eight eager kernels that keep four
    // tensors of width f (core/model/activation_function.hpp); a one-kernel function keeps its
    // input 2sbf (8sbh at f = 4h).
    b.leaf(p + ".mlp.act", activation_function_class(config.activation),
           activation_function_costs(config.activation, f, e));
    conv(p + ".mlp.c_proj", f, h, 2 * f);  // GeLU output 2sbf (8sbh at f = 4h)
    dropout(p + ".mlp.dropout", config.hidden_dropout);
    b.end();
    b.end();
  }
  layer_norm("transformer.ln_f");
  b.end();
  const int head_weight = b.param(tied ? "transformer.wte.weight" : "lm_head.weight");
  b.leaf("lm_head", "Linear", linear_costs(h, v, false, e).saving(2 * h), {head_weight});
  b.end();
  return spec;
}

}  // namespace prefetchlab::core
