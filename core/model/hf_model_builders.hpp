#pragma once
// Builder of the decoder-only families read from a config.json (hf_decoder_model.cpp).
#include <string>

#include "core/model/hf_decoder_config.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

ModelSpec build_hf_decoder_model(const HfDecoderConfig& config, const std::string& name, DType dtype,
                                 AttentionImpl attention);

// Marks the modules fed only token ids (embeddings and their ancestors), whose post-backward
// hook never fires (ModuleSpec::post_backward_hook_fires). Every builder's result goes through it.
void mark_token_id_modules(ModelSpec& model);

}  // namespace prefetchlab::core
