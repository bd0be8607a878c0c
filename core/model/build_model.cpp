#include <stdexcept>

#include "core/model/hf_model_builders.hpp"
#include "core/model/model_builders.hpp"

namespace prefetchlab::core {

ModelSpec model_spec_header(const ModelConfig& config, const std::string& name, bool causal) {
  ModelSpec spec;
  spec.name = name;
  spec.architecture = architecture_name(config.architecture);
  spec.hidden_size = config.hidden_size;
  spec.num_layers = config.num_layers;
  spec.num_heads = config.num_heads;
  // Only Llama has grouped-query attention; ModelConfig keeps num_kv_heads == num_heads otherwise.
  spec.num_kv_heads = config.architecture == Architecture::kLlama ? config.num_kv_heads : config.num_heads;
  spec.intermediate_size = config.intermediate_size;
  spec.vocab_size = config.vocab_size;
  spec.max_positions = config.max_positions;
  spec.causal = causal;
  spec.attention_dropout = config.attention_dropout;
  return spec;
}

// Every family here feeds token ids to its embeddings (class "Embedding") and nothing else to
// them or to the modules above them; see ModuleSpec::post_backward_hook_fires.
void mark_token_id_modules(ModelSpec& model) {
  for (ModuleSpec& module : model.modules) {
    if (module.class_name != "Embedding") continue;
    module.post_backward_hook_fires = false;
    for (int up = module.parent; up >= 0; up = model.modules[static_cast<std::size_t>(up)].parent) {
      model.modules[static_cast<std::size_t>(up)].post_backward_hook_fires = false;
    }
  }
}

ModelSpec build_llama_model(const ModelConfig& config, const std::string& name, DType dtype,
                            AttentionImpl attention) {
  HfDecoderConfig c;
  c.model_type = "llama";
  c.class_prefix = "Llama";
  c.hidden_size = config.hidden_size;
  c.num_layers = config.num_layers;
  c.num_heads = config.num_heads;
  c.num_kv_heads = config.num_kv_heads;
  c.head_dim = config.hidden_size / config.num_heads;
  c.intermediate_size = config.intermediate_size;
  c.vocab_size = config.vocab_size;
  c.max_positions = config.max_positions;
  c.tie_embeddings = config.tie_embeddings;
  // The model file's `bias` is LlamaConfig's attention_bias and mlp_bias together.
  c.qkv_bias = c.o_bias = c.mlp_bias = config.bias;
  c.activation = config.activation;
  return build_hf_decoder_model(c, name, dtype, attention);
}

ModelSpec build_model(const ModelConfig& config, const std::string& name, DType dtype,
                      AttentionImpl attention) {
  ModelSpec model;
  switch (config.architecture) {
    case Architecture::kGpt2: model = build_gpt2_model(config, name, dtype, attention); break;
    case Architecture::kBert: model = build_bert_model(config, name, dtype, attention); break;
    case Architecture::kLlama: model = build_llama_model(config, name, dtype, attention); break;
    default: throw std::logic_error("build_model: unknown architecture");
  }
  mark_token_id_modules(model);
  return model;
}

}  // namespace prefetchlab::core
