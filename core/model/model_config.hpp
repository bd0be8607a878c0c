#pragma once
// The architecture numbers of one model (what a models/*.yaml file holds), read strictly.
// Everything else in a ModelSpec (module tree, parameter table, costs) is derived from these
// by the per-family builders (model_builders.hpp).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/model/activation_function.hpp"
#include "core/model/model_spec.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

enum class Architecture { kGpt2, kBert, kLlama };

// Which Hugging Face top-level class the model is built as.
enum class ModelHead {
  kLm,        // gpt2: GPT2LMHeadModel
  kNone,      // bert: BertModel (with pooler)
  kQa,        // bert: BertForQuestionAnswering (BertModel without pooler + qa_outputs)
  kMlm,       // bert: BertForMaskedLM (no pooler; decoder weight tied to word embeddings)
  kCausalLm,  // llama: LlamaForCausalLM
};

const char* architecture_name(Architecture architecture);
const char* head_name(ModelHead head);

// The largest dropout probability a model file may give: nn.Dropout accepts 1, which zeroes
// every activation; training on it is a typo.
constexpr double kMaxDropoutProbability = 0.99;

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;       // llama (GQA); equals num_heads elsewhere
  std::int64_t intermediate_size = 0;  // MLP width; gpt2 defaults to 4 * hidden_size
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;
  std::int64_t type_vocab_size = 0;    // bert only
  bool tie_embeddings = false;         // output projection shares the input embedding
  bool bias = false;                   // llama: attention_bias and mlp_bias
  ModelHead head = ModelHead::kCausalLm;
  // The MLP's activation and the dropout probabilities in training (0: nn.Dropout returns its
  // input, no kernel and no mask). Defaults are each family's HF config class: GPT2Config
  // gelu_new and 0.1 (resid_pdrop, attn_pdrop, embd_pdrop), BertConfig gelu and 0.1
  // (hidden_dropout_prob for the hidden and embedding dropouts, attention_probs_dropout_prob),
  // Llama silu and no dropout modules.
  ActivationFunction activation = ActivationFunction::kSilu;
  double hidden_dropout = 0;
  double attention_dropout = 0;
  double embedding_dropout = 0;
};

// Reads and validates a model document. Unknown keys, wrong types, non-positive sizes, heads
// that do not divide the hidden size, kv heads that do not divide the heads, and keys the
// architecture does not use are InputErrors naming file, line and key.
ModelConfig load_model_config(const YamlSection& root);

// Loads a model file and builds its ModelSpec; the model's name is the file stem.
ModelSpec load_model_file(const std::filesystem::path& file, DType dtype,
                          AttentionImpl attention = AttentionImpl::kSdpa);

// Sorted stems of the *.yaml files in `models_dir` (the bundled models).
std::vector<std::string> bundled_model_names(const std::filesystem::path& models_dir);

}  // namespace prefetchlab::core
