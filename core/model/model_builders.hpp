#pragma once
// Builders that turn a ModelConfig into the module tree and parameter table ZeRO-3 sees.
// Each family follows Hugging Face transformers v4.46.3 (sdpa attention is the default there;
// eager and flash_attention_2 are the other attn_implementations):
// module names, classes, parameter creation order (= DeepSpeed ds_id) and forward call order.
#include <string>

#include "core/model/model_config.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// Dispatches on config.architecture.
ModelSpec build_model(const ModelConfig& config, const std::string& name, DType dtype,
                      AttentionImpl attention = AttentionImpl::kSdpa);

// The architecture numbers every family copies into its ModelSpec (modules and params empty).
ModelSpec model_spec_header(const ModelConfig& config, const std::string& name, bool causal);

ModelSpec build_gpt2_model(const ModelConfig& config, const std::string& name, DType dtype,
                            AttentionImpl attention);
ModelSpec build_bert_model(const ModelConfig& config, const std::string& name, DType dtype,
                            AttentionImpl attention);
// A models/*.yaml Llama is LlamaForCausalLM with those numbers: built by the decoder builder a
// Llama config.json goes through (hf_decoder_model.cpp), one builder for both forms.
ModelSpec build_llama_model(const ModelConfig& config, const std::string& name, DType dtype,
                            AttentionImpl attention);

}  // namespace prefetchlab::core
