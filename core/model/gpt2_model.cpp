// GPT2LMHeadModel as in Hugging Face transformers v4.46.3 (models/gpt2/modeling_gpt2.py,
// attn_implementation "sdpa" -> GPT2SdpaAttention). Conv1D weights are (in, out) with bias.
#include <string>

#include "core/model/model_builders.hpp"
#include "core/model/module_tree_builder.hpp"

namespace prefetchlab::core {

ModelSpec build_gpt2_model(const ModelConfig& config, const std::string& name, DType dtype) {
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
  auto dropout = [&](const std::string& module) {
    // Saves its mask, sbh bytes.
    b.leaf(module, "Dropout", dropout_costs(h, e).saving(h));
  };

  // Root own work: the causal-LM loss (HF's loss upcasts logits to fp32).
  b.begin("", "GPT2LMHeadModel", cross_entropy_costs(v, e, 4));
  b.begin("transformer", "GPT2Model", elementwise_costs(h, 1, 2, e));  // wte + wpe
  b.leaf("transformer.wte", "Embedding", embedding_costs(h, e), {b.param("transformer.wte.weight")});
  b.leaf("transformer.wpe", "Embedding", embedding_costs(h, e), {b.param("transformer.wpe.weight")});
  dropout("transformer.drop");
  // transformer.h (ModuleList) is only iterated, never called: its hooks never fire.
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = block_prefix(i);
    b.begin(p, "GPT2Block", elementwise_costs(h, 1, 2, e) + elementwise_costs(h, 1, 2, e));
    layer_norm(p + ".ln_1");
    // Own work: the sdpa core. Saved (Korthikanti's unfused accounting): Q and K 4sbh, V 2sbh,
    // softmax output 2as^2b, its dropout mask as^2b, dropout output 2as^2b.
    // GPT2SdpaAttention passes attn_dropout.p to sdpa and never calls attn_dropout: left out.
    b.begin(p + ".attn", "GPT2SdpaAttention",
            attention_core_costs(h, h, true, e).saving(6 * h, 5 * a));
    conv(p + ".attn.c_attn", h, 3 * h, 2 * h);  // QKV input 2sbh
    conv(p + ".attn.c_proj", h, h, 2 * h);      // output-projection input 2sbh
    dropout(p + ".attn.resid_dropout");
    b.end();
    layer_norm(p + ".ln_2");
    // GPT2MLP.forward: c_fc, act, c_proj, dropout.
    b.begin(p + ".mlp", "GPT2MLP");
    conv(p + ".mlp.c_fc", h, f, 2 * h);  // first-linear input 2sbh
    // gelu_new (tanh approximation, ~8 FLOPs/element); saves its input 2sbf (8sbh at f = 4h).
    b.leaf(p + ".mlp.act", "NewGELUActivation", elementwise_costs(f, 8, 1, e).saving(2 * f));
    conv(p + ".mlp.c_proj", f, h, 2 * f);  // GeLU output 2sbf (8sbh at f = 4h)
    dropout(p + ".mlp.dropout");
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
