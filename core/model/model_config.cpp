#include "core/model/model_config.hpp"

#include <algorithm>
#include <string_view>

#include "core/model/model_builders.hpp"

namespace prefetchlab::core {
namespace {

// Generous upper bound for any size: keeps products like vocab * hidden far from int64 overflow.
constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;

// Rejects a key that exists in the file but has no meaning for this model, naming the key.
void reject_unused(const YamlSection& root, std::string_view key, const std::string& why) {
  if (!root.has(key)) return;
  root.mark_known(key);
  root.fail(key, "is not used " + why, "this key removed (it has no effect here)");
}

ModelHead read_head(const YamlSection& root, Architecture architecture) {
  switch (architecture) {
    case Architecture::kGpt2:
      return root.get_enum<ModelHead>("head", ModelHead::kLm, {{"lm", ModelHead::kLm}});
    case Architecture::kBert:
      return root.get_enum<ModelHead>(
          "head", ModelHead::kNone,
          {{"none", ModelHead::kNone}, {"qa", ModelHead::kQa}, {"mlm", ModelHead::kMlm}});
    case Architecture::kLlama:
      return root.get_enum<ModelHead>("head", ModelHead::kCausalLm,
                                      {{"causal_lm", ModelHead::kCausalLm}});
  }
  return ModelHead::kLm;
}

}  // namespace

const char* architecture_name(Architecture architecture) {
  switch (architecture) {
    case Architecture::kGpt2: return "gpt2";
    case Architecture::kBert: return "bert";
    case Architecture::kLlama: return "llama";
  }
  return "?";
}

const char* head_name(ModelHead head) {
  switch (head) {
    case ModelHead::kLm: return "lm";
    case ModelHead::kNone: return "none";
    case ModelHead::kQa: return "qa";
    case ModelHead::kMlm: return "mlm";
    case ModelHead::kCausalLm: return "causal_lm";
  }
  return "?";
}

ModelConfig load_model_config(const YamlSection& root) {
  ModelConfig config;
  config.architecture = root.require_enum<Architecture>(
      "architecture",
      {{"gpt2", Architecture::kGpt2}, {"bert", Architecture::kBert}, {"llama", Architecture::kLlama}});
  const Architecture arch = config.architecture;
  const std::string on_arch = std::string("by architecture '") + architecture_name(arch) + "'";

  // Keys that only one family reads; anywhere else they would be silently meaningless.
  if (arch != Architecture::kLlama) {
    reject_unused(root, "num_kv_heads", on_arch);
    reject_unused(root, "bias", on_arch + " (its biases are fixed by the architecture)");
  }
  if (arch != Architecture::kBert) reject_unused(root, "type_vocab_size", on_arch);
  if (arch == Architecture::kLlama) reject_unused(root, "dropout", on_arch + " (LlamaModel has no dropout modules)");
  config.head = read_head(root, arch);
  // Only BertForMaskedLM among the bert heads has an output projection that could be tied.
  const bool bert_without_lm = arch == Architecture::kBert && config.head != ModelHead::kMlm;
  if (bert_without_lm) {
    reject_unused(root, "tie_embeddings",
                  std::string("by a bert model with head '") + head_name(config.head) + "'");
  }

  // Report misspelt keys first: "max_positons is not a known key, did you mean max_positions"
  // is more useful than "max_positions is missing".
  for (const char* key : {"hidden_size", "num_layers", "num_heads", "vocab_size", "max_positions",
                          "intermediate_size"}) {
    root.mark_known(key);
  }
  if (arch == Architecture::kLlama) {
    root.mark_known("num_kv_heads");
    root.mark_known("bias");
  }
  if (arch == Architecture::kBert) root.mark_known("type_vocab_size");
  if (!bert_without_lm) root.mark_known("tie_embeddings");
  root.mark_known("activation");
  if (arch != Architecture::kLlama) root.mark_known("dropout");
  root.finish();

  config.hidden_size = root.require_int("hidden_size", 1, kMaxSize);
  config.num_layers = root.require_int("num_layers", 1, kMaxSize);
  config.num_heads = root.require_int("num_heads", 1, kMaxSize);
  config.vocab_size = root.require_int("vocab_size", 1, kMaxSize);
  config.max_positions = root.require_int("max_positions", 1, kMaxSize);
  if (config.hidden_size % config.num_heads != 0) {
    root.fail("num_heads",
              "is " + std::to_string(config.num_heads) + ", which does not divide hidden_size " +
                  std::to_string(config.hidden_size),
              "a divisor of hidden_size (head_dim = hidden_size / num_heads)");
  }

  config.num_kv_heads = config.num_heads;
  if (arch == Architecture::kLlama) {
    config.num_kv_heads = root.get_int("num_kv_heads", config.num_heads, 1, kMaxSize);
    if (config.num_heads % config.num_kv_heads != 0) {
      root.fail("num_kv_heads",
                "is " + std::to_string(config.num_kv_heads) + ", which does not divide num_heads " +
                    std::to_string(config.num_heads),
                "a divisor of num_heads (grouped-query attention)");
    }
    config.bias = root.get_bool("bias", false);
  }

  // HF GPT2Config: n_inner = None means 4 * n_embd. BERT and Llama configs always state it.
  if (arch == Architecture::kGpt2) {
    config.intermediate_size = root.get_int("intermediate_size", 4 * config.hidden_size, 1, kMaxSize);
  } else {
    config.intermediate_size = root.require_int("intermediate_size", 1, kMaxSize);
  }

  switch (arch) {
    case Architecture::kGpt2:
      config.tie_embeddings = root.get_bool("tie_embeddings", true);
      break;
    case Architecture::kBert:
      config.type_vocab_size = root.get_int("type_vocab_size", 2, 1, kMaxSize);
      if (!bert_without_lm) config.tie_embeddings = root.get_bool("tie_embeddings", true);
      break;
    case Architecture::kLlama:
      config.tie_embeddings = root.get_bool("tie_embeddings", false);
      break;
  }
  // The HF config classes' defaults (ModelConfig); `dropout` sets every dropout of the model.
  const ActivationFunction default_activation = arch == Architecture::kGpt2   ? ActivationFunction::kGeluNew
                                                : arch == Architecture::kBert ? ActivationFunction::kGelu
                                                                              : ActivationFunction::kSilu;
  config.activation = read_activation_function(root, "activation", default_activation);
  if (arch != Architecture::kLlama) {
    const double dropout = root.get_double("dropout", 0.1, 0.0, kMaxDropoutProbability);
    config.hidden_dropout = config.attention_dropout = config.embedding_dropout = dropout;
  }
  return config;
}

ModelSpec load_model_file(const std::filesystem::path& file, DType dtype, AttentionImpl attention) {
  const YamlSection root = YamlSection::load_file(file.string());
  const ModelConfig config = load_model_config(root);
  return build_model(config, file.stem().string(), dtype, attention);
}

std::vector<std::string> bundled_model_names(const std::filesystem::path& models_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace prefetchlab::core
