// The decoder-only families read from a Hugging Face config.json (llama, mistral, qwen2, gemma,
// gemma2, phi3, mixtral, qwen2_moe), built as transformers v4.46.3 builds their *ForCausalLM
// (models/<type>/modeling_<type>.py): module names and classes, parameter creation order (ds_id)
// and forward call order. They share LlamaForCausalLM's skeleton (llama_model.cpp); what differs
// is set by HfDecoderConfig. One simplification: the rotary embedding (no parameters) is placed
// once at model.rotary_emb as Llama's 4.46 code has it; some families' 4.46 code call one per
// attention module instead, which only moves a parameterless hook.
#include <string>

#include "core/model/hf_decoder_config.hpp"
#include "core/model/hf_model_builders.hpp"
#include "core/model/module_tree_builder.hpp"

namespace prefetchlab::core {

ModelSpec build_hf_decoder_model(const HfDecoderConfig& config, const std::string& name, DType dtype,
                                 AttentionImpl attention) {
  ModelSpec spec;
  spec.name = name;
  spec.architecture = config.model_type;
  spec.hidden_size = config.hidden_size;
  spec.num_layers = config.num_layers;
  spec.num_heads = config.num_heads;
  spec.num_kv_heads = config.num_kv_heads;
  spec.intermediate_size = config.intermediate_size;
  spec.vocab_size = config.vocab_size;
  spec.max_positions = config.max_positions;
  spec.causal = true;
  spec.attention_dropout = config.attention_dropout;
  spec.num_experts = config.num_experts;
  spec.experts_per_token = config.experts_per_token;

  ModuleTreeBuilder b(spec, dtype);
  const std::string& cls = config.class_prefix;
  const std::int64_t e = b.element_bytes();
  const std::int64_t h = config.hidden_size;
  const std::int64_t f = config.intermediate_size;
  const std::int64_t v = config.vocab_size;
  const std::int64_t a = config.num_heads;
  const std::int64_t q_dim = config.num_heads * config.head_dim;
  const std::int64_t kv_dim = config.num_kv_heads * config.head_dim;
  const bool moe = config.num_experts > 0;
  auto layer_prefix = [](std::int64_t i) { return "model.layers." + std::to_string(i); };
  auto sparse = [&](std::int64_t i) { return moe && config.sparse_layers[static_cast<std::size_t>(i)]; };

  // --- Parameters in __init__ creation order (= ds_id under zero.Init) ---
  b.add_param("model.embed_tokens.weight", v * h, config.tie_embeddings ? h : 0,
              config.tie_embeddings ? v : 0);
  auto add_linear = [&](const std::string& module, std::int64_t in, std::int64_t out, bool with_bias) {
    b.add_param(module + ".weight", in * out, in, out);
    if (with_bias) b.add_param(module + ".bias", out);
  };
  // A gated MLP: LlamaMLP / Qwen2MoeMLP create gate, up, down; Mixtral's expert w1 (gate),
  // w2 (down), w3 (up); Phi-3 one gate_up_proj, then down_proj.
  auto add_mlp = [&](const std::string& p, std::int64_t width, bool mixtral_expert) {
    if (mixtral_expert) {
      add_linear(p + ".w1", h, width, false);
      add_linear(p + ".w2", width, h, false);
      add_linear(p + ".w3", h, width, false);
    } else if (config.fused_gate_up) {
      add_linear(p + ".gate_up_proj", h, 2 * width, config.mlp_bias);
      add_linear(p + ".down_proj", width, h, config.mlp_bias);
    } else {
      add_linear(p + ".gate_proj", h, width, config.mlp_bias);
      add_linear(p + ".up_proj", h, width, config.mlp_bias);
      add_linear(p + ".down_proj", width, h, config.mlp_bias);
    }
  };
  const bool mixtral = config.model_type == "mixtral";
  const std::string moe_name = mixtral ? "block_sparse_moe" : "mlp";
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    // <X>DecoderLayer.__init__: self_attn, mlp (or the sparse block), then the norms.
    const std::string p = layer_prefix(i);
    if (config.fused_qkv) {
      // Phi3Attention.__init__ creates o_proj before qkv_proj.
      add_linear(p + ".self_attn.o_proj", q_dim, h, config.o_bias);
      add_linear(p + ".self_attn.qkv_proj", h, q_dim + 2 * kv_dim, config.qkv_bias);
    } else {
      add_linear(p + ".self_attn.q_proj", h, q_dim, config.qkv_bias);
      add_linear(p + ".self_attn.k_proj", h, kv_dim, config.qkv_bias);
      add_linear(p + ".self_attn.v_proj", h, kv_dim, config.qkv_bias);
      add_linear(p + ".self_attn.o_proj", q_dim, h, config.o_bias);
    }
    if (sparse(i)) {
      const std::string m = p + "." + moe_name;
      add_linear(m + ".gate", h, config.num_experts, false);  // the router
      for (std::int64_t x = 0; x < config.num_experts; ++x) {
        add_mlp(m + ".experts." + std::to_string(x), config.expert_intermediate_size, mixtral);
      }
      if (config.shared_expert_intermediate_size > 0) {
        add_mlp(m + ".shared_expert", config.shared_expert_intermediate_size, false);
        add_linear(m + ".shared_expert_gate", h, 1, false);
      }
    } else {
      add_mlp(p + ".mlp", f, false);
    }
    b.add_param(p + ".input_layernorm.weight", h);
    b.add_param(p + ".post_attention_layernorm.weight", h);
    if (config.sandwich_norms) {
      b.add_param(p + ".pre_feedforward_layernorm.weight", h);
      b.add_param(p + ".post_feedforward_layernorm.weight", h);
    }
  }
  b.add_param("model.norm.weight", h);
  if (!config.tie_embeddings) b.add_param("lm_head.weight", h * v, h, v);

  // --- Modules in forward execution order ---
  // Activation bytes as in llama_model.cpp (our Korthikanti-style estimate, itemised per tensor).
  auto ids = [&](const std::string& module, bool with_bias) {
    std::vector<int> out{b.param(module + ".weight")};
    if (with_bias) out.push_back(b.param(module + ".bias"));
    return out;
  };
  auto linear = [&](const std::string& module, std::int64_t in, std::int64_t out, bool with_bias,
                    std::int64_t saved, std::int64_t share_num = 1, std::int64_t share_den = 1) {
    b.leaf(module, "Linear",
           token_share(linear_costs(in, out, with_bias, e).saving(saved), share_num, share_den),
           ids(module, with_bias));
  };
  auto norm = [&](const std::string& module) {
    b.leaf(module, cls + "RMSNorm", rms_norm_costs(h, e).saving(2 * h), {b.param(module + ".weight")});
  };
  // Phi-3's dropout modules: called (their hooks fire) whatever p is; with p = 0, Phi3Config's
  // default, nn.Dropout returns its input (no kernel, no mask).
  auto dropout = [&](const std::string& module, double p) {
    if (!config.residual_dropouts) return;
    if (p > 0) {
      b.leaf(module, "Dropout", dropout_costs(h, e).saving(h));
    } else {
      b.leaf(module, "Dropout");
    }
  };
  const char* act_class = activation_function_class(config.activation);
  // One gated MLP's forward on a token share: gate, act, up, down (Mixtral: w1, act, w3, w2).
  auto mlp = [&](const std::string& p, const std::string& class_name, std::int64_t width,
                 bool mixtral_expert, std::int64_t num, std::int64_t den) {
    b.begin(p, class_name, token_share(product_costs(width, e).saving(2 * width), num, den));
    const ModuleCosts act = token_share(activation_function_costs(config.activation, width, e), num, den);
    if (mixtral_expert) {
      linear(p + ".w1", h, width, false, 2 * h, num, den);
      b.leaf(p + ".act_fn", act_class, act);
      linear(p + ".w3", h, width, false, 0, num, den);
      linear(p + ".w2", width, h, false, 2 * width, num, den);
    } else if (config.fused_gate_up) {
      linear(p + ".gate_up_proj", h, 2 * width, config.mlp_bias, 2 * h, num, den);
      b.leaf(p + ".activation_fn", act_class, act);
      linear(p + ".down_proj", width, h, config.mlp_bias, 2 * width, num, den);
    } else {
      linear(p + ".gate_proj", h, width, config.mlp_bias, 2 * h, num, den);
      b.leaf(p + ".act_fn", act_class, act);
      linear(p + ".up_proj", h, width, config.mlp_bias, 0, num, den);
      linear(p + ".down_proj", width, h, config.mlp_bias, 2 * width, num, den);
    }
    b.end();
  };

  // Root own work: the causal-LM loss over fp32 logits (plus Gemma-2's tanh soft-capping).
  ModuleCosts root_costs = cross_entropy_costs(v, e, true);
  if (config.final_logit_softcap) root_costs = root_costs + activation_costs("logit_softcap", v, 3, e);
  b.begin("", cls + "ForCausalLM", root_costs);
  // Gemma scales the embeddings by sqrt(hidden) in the model's own forward.
  b.begin("model", cls + "Model",
          config.scaled_embeddings ? activation_costs("embed_scale", h, 1, e) : ModuleCosts{});
  b.leaf("model.embed_tokens", "Embedding", embedding_costs(h, e), {b.param("model.embed_tokens.weight")});
  dropout("model.embed_dropout", config.embedding_dropout);
  b.leaf("model.rotary_emb", cls + "RotaryEmbedding",
         activation_costs("rotary_emb.cos_sin", config.head_dim, 3, e));
  const bool expand_kv = kv_dim != q_dim && !is_flash_attn_package(attention);
  const std::int64_t kv_width = expand_kv ? q_dim : kv_dim;
  AttentionShape shape;
  shape.hidden = q_dim;
  shape.kv_dim = kv_width;
  shape.heads = a;
  shape.causal = true;
  shape.softmax_in_fp32 = true;
  shape.dropout = config.attention_dropout > 0;  // eager only: sdpa and flash fuse it
  const std::int64_t saved_per_token = attention == AttentionImpl::kEager
                                           ? 2 * q_dim + 4 * kv_width
                                           : 2 * q_dim + 4 * kv_width + 2 * q_dim + 4 * a;
  // Eager: the fp32 softmax and its bf16 cast; a dropout adds its mask and output.
  const std::int64_t saved_per_position =
      attention == AttentionImpl::kEager ? 6 * a + (shape.dropout ? 3 * a : 0) : 0;
  const std::string attn_class = cls + (attention == AttentionImpl::kEager  ? "Attention"
                                        : attention == AttentionImpl::kSdpa ? "SdpaAttention"
                                        : attention == AttentionImpl::kFlash ? "FlashAttention2"
                                                                             : "Attention");
  const std::int64_t k_share = config.experts_per_token;
  const std::int64_t n_experts = config.num_experts;
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = layer_prefix(i);
    ModuleCosts adds = residual_add_costs(h, e) + residual_add_costs(h, e);
    b.begin(p, cls + "DecoderLayer", adds);
    norm(p + ".input_layernorm");
    ModuleCosts attn = rotary_costs("q", q_dim, e) + rotary_costs("k", kv_dim, e);
    if (expand_kv) {
      attn = attn + copy_costs("repeat_kv.k", kv_dim, q_dim, e) + copy_costs("repeat_kv.v", kv_dim, q_dim, e);
    }
    attn = attn + attention_core_costs(attention, shape, e);
    b.begin(p + ".self_attn", attn_class, attn.saving(saved_per_token, saved_per_position));
    if (config.fused_qkv) {
      linear(p + ".self_attn.qkv_proj", h, q_dim + 2 * kv_dim, config.qkv_bias, 2 * h);
    } else {
      linear(p + ".self_attn.q_proj", h, q_dim, config.qkv_bias, 2 * h);
      linear(p + ".self_attn.k_proj", h, kv_dim, config.qkv_bias, 0);
      linear(p + ".self_attn.v_proj", h, kv_dim, config.qkv_bias, 0);
    }
    linear(p + ".self_attn.o_proj", q_dim, h, config.o_bias, 2 * q_dim);
    b.end();
    dropout(p + ".resid_attn_dropout", config.residual_dropout);
    norm(p + ".post_attention_layernorm");
    if (config.sandwich_norms) norm(p + ".pre_feedforward_layernorm");
    if (sparse(i)) {
      const std::string m = p + "." + moe_name;
      // The block's own work: softmax over the router logits and top-k (fp32), the tokens'
      // gather into each expert's batch and the weighted index_add back (top_k rows each).
      ModuleCosts own = activation_costs("router.softmax_topk", n_experts, 5, 4) +
                        copy_costs("moe.dispatch", h * k_share, h * k_share, e) +
                        copy_costs("moe.combine", h * k_share, h * k_share, e);
      if (config.shared_expert_intermediate_size > 0) own = own + activation_costs("shared_expert.sigmoid_mul", h, 2, e);
      b.begin(m, cls + "SparseMoeBlock", own.saving(2 * h * k_share));
      linear(m + ".gate", h, n_experts, false, 2 * h);
      // experts is a ModuleList, only indexed: its own hooks never fire. Each expert sees on
      // average top_k / num_experts of the tokens (moe routing may change this per iteration).
      for (std::int64_t x = 0; x < n_experts; ++x) {
        mlp(m + ".experts." + std::to_string(x), mixtral ? cls + "BlockSparseTop2MLP" : cls + "MLP",
            config.expert_intermediate_size, mixtral, k_share, n_experts);
      }
      if (config.shared_expert_intermediate_size > 0) {
        mlp(m + ".shared_expert", cls + "MLP", config.shared_expert_intermediate_size, false, 1, 1);
        linear(m + ".shared_expert_gate", h, 1, false, 0);
      }
      b.end();
    } else {
      mlp(p + ".mlp", cls + "MLP", f, false, 1, 1);
    }
    if (config.sandwich_norms) norm(p + ".post_feedforward_layernorm");
    dropout(p + ".resid_mlp_dropout", config.residual_dropout);
    b.end();
  }
  norm("model.norm");
  b.end();
  const int head_weight = b.param(config.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  b.leaf("lm_head", "Linear", linear_costs(h, v, false, e).saving(2 * h), {head_weight});
  b.end();
  return spec;
}

}  // namespace prefetchlab::core
