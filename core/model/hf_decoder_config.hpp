#pragma once
// The architecture numbers of a Hugging Face decoder-only model read from its config.json
// (llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, qwen2_moe): what differs between these
// families is only which projections are fused, which carry a bias, how many norms a layer has,
// the activation and whether the MLP is a mixture of experts. hf_config.hpp reads it;
// build_hf_decoder_model (hf_decoder_model.cpp) turns it into the module tree.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/activation_function.hpp"

namespace prefetchlab::core {

struct HfDecoderConfig {
  std::string model_type;    // config.json "model_type", e.g. "qwen2"
  std::string class_prefix;  // HF's class-name prefix, e.g. "Qwen2" (Qwen2ForCausalLM)
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;  // Gemma states it (256 with hidden 3072); else hidden / heads
  std::int64_t intermediate_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;
  bool tie_embeddings = false;
  bool qkv_bias = false;  // Qwen2: q/k/v carry a bias, o_proj does not
  bool o_bias = false;    // Llama's attention_bias puts one on all four
  bool mlp_bias = false;  // Llama's mlp_bias
  bool fused_qkv = false;      // Phi-3: one qkv_proj
  bool fused_gate_up = false;  // Phi-3: one gate_up_proj
  bool sandwich_norms = false;     // Gemma-2: pre/post feed-forward norms as well
  bool scaled_embeddings = false;  // Gemma: embeddings times sqrt(hidden)
  ActivationFunction activation = ActivationFunction::kSilu;  // Gemma: gelu_pytorch_tanh
  bool residual_dropouts = false;  // Phi-3: embed_dropout, resid_attn_dropout, resid_mlp_dropout
  double residual_dropout = 0;     // Phi-3: resid_pdrop
  double embedding_dropout = 0;    // Phi-3: embd_pdrop
  double attention_dropout = 0;    // eager: a dropout over the attention probabilities
  bool final_logit_softcap = false;  // Gemma-2: tanh soft-capping of the logits
  // Mixture of experts (0 experts: a dense MLP in every layer).
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 0;       // top-k
  std::int64_t expert_intermediate_size = 0;
  std::int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE's shared expert; 0: none
  std::vector<bool> sparse_layers;                   // per layer: MoE block or dense MLP
};

}  // namespace prefetchlab::core
