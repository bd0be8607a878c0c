#include "core/model/hf_config.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "core/input/closest_match.hpp"
#include "core/input/input_error.hpp"
#include "core/input/json_section.hpp"
#include "core/model/hf_decoder_config.hpp"
#include "core/model/hf_model_builders.hpp"
#include "core/model/model_builders.hpp"

namespace prefetchlab::core {
namespace {

// Generous upper bound for any size (as model_config.cpp): products stay far from overflow.
constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;
// Layers of one model: the largest published ones have ~100-200; each layer is ~15 modules.
constexpr std::int64_t kMaxLayers = 65536;

// Keys of HF configs that do not change the module tree, the parameters or what the simulator
// prices: numerics (epsilons, RoPE), token ids, generation and bookkeeping. Read and noted.
constexpr std::string_view kNoEffectKeys[] = {
    "_name_or_path", "transformers_version", "torch_dtype", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "rms_norm_eps", "layer_norm_eps",
    "layer_norm_epsilon", "rope_theta", "rope_scaling", "initializer_range", "use_cache",
    "sliding_window", "use_sliding_window", "max_window_layers", "pretraining_tp",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "attn_logit_softcapping", "query_pre_attn_scalar", "cache_implementation",
    "original_max_position_embeddings", "position_embedding_type",
    "classifier_dropout", "gradient_checkpointing", "n_ctx", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "summary_activation",
    "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "task_specific_params", "auto_map", "lora_alpha", "head_pdrop"};

// Keys that set the activation or a dropout: read by the families whose classes use them
// (family_reads), and without effect in the others.
constexpr std::string_view kFamilyKeys[] = {"hidden_act", "hidden_activation", "activation_function",
                                            "attention_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                                            "hidden_dropout_prob", "attention_probs_dropout_prob"};

bool family_reads(std::string_view model_type, std::string_view key) {
  if (model_type == "gpt2") return key == "activation_function" || key == "resid_pdrop" || key == "embd_pdrop" || key == "attn_pdrop";
  if (model_type == "bert") return key == "hidden_act" || key == "hidden_dropout_prob" || key == "attention_probs_dropout_prob";
  // GemmaMLP and Gemma2MLP apply ACT2FN[hidden_activation]; the other decoders ACT2FN[hidden_act].
  const bool gemma = model_type == "gemma" || model_type == "gemma2";
  if (key == (gemma ? "hidden_activation" : "hidden_act") || key == "attention_dropout") return true;
  return model_type == "phi3" && (key == "resid_pdrop" || key == "embd_pdrop");
}

// A dropout probability, `fallback` when absent or null.
double read_dropout(const YamlSection& root, std::string_view key, double fallback) {
  root.mark_known(key);
  if (!root.has(key) || root.raw(key).IsNull()) return fallback;
  return root.require_double(key, 0.0, kMaxDropoutProbability);
}

// The family of each model type, its class-name prefix and its ForCausalLM default for
// tie_word_embeddings (each family's configuration_<type>.py in transformers).
struct DecoderFamily {
  std::string_view model_type;
  std::string_view class_prefix;
  bool tie_default;
};
constexpr DecoderFamily kDecoderFamilies[] = {
    {"llama", "Llama", false},   {"mistral", "Mistral", false}, {"qwen2", "Qwen2", false},
    {"gemma", "Gemma", true},    {"gemma2", "Gemma2", true},    {"phi3", "Phi3", false},
    {"mixtral", "Mixtral", false}, {"qwen2_moe", "Qwen2Moe", false}};

// A key present with a non-null value.
// Marks it known either way, so a misspelling of an optional key is suggested its right name.
bool present(const YamlSection& root, std::string_view key) {
  root.mark_known(key);
  if (!root.has(key)) return false;
  return !root.raw(key).IsNull();
}

// Parameter counts stay far from int64 overflow: 2^50 elements is a thousand times any model.
void check_parameter_estimate(const YamlSection& root, std::string_view width_key, double estimate) {
  if (estimate > 1125899906842624.0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", estimate);
    root.fail(width_key, std::string("with the other sizes makes about ") + text + " parameters",
              "sizes giving at most 2^50 (about 1.1e15) parameters");
  }
}

std::int64_t require_size(const YamlSection& root, std::string_view key) {
  return root.require_int(key, 1, kMaxSize);
}

// "architectures": ["LlamaForCausalLM"] (absent is fine); the first entry, or "".
std::string first_architecture(const YamlSection& root) {
  if (!present(root, "architectures")) return "";
  const YAML::Node list = root.raw("architectures");
  if (!list.IsSequence() || list.size() == 0 || !list[0].IsScalar()) {
    root.fail("architectures", "is not a list of class names", "e.g. [\"LlamaForCausalLM\"]");
  }
  return list[0].Scalar();
}

void check_causal_lm(const YamlSection& root, const std::string& expected) {
  const std::string given = first_architecture(root);
  if (!given.empty() && given != expected) {
    root.fail("architectures", "names " + given + ", which is not built",
              "[\"" + expected + "\"] (the causal-LM model is what is built for this model_type)");
  }
}

HfDecoderConfig read_decoder(const YamlSection& root, const DecoderFamily& family) {
  HfDecoderConfig c;
  c.model_type = std::string(family.model_type);
  c.class_prefix = std::string(family.class_prefix);
  check_causal_lm(root, c.class_prefix + "ForCausalLM");
  c.hidden_size = require_size(root, "hidden_size");
  c.num_layers = root.require_int("num_hidden_layers", 1, kMaxLayers);
  c.num_heads = require_size(root, "num_attention_heads");
  // The heads against the hidden size first: a head count that splits no hidden size is the
  // head count's fault, whatever num_key_value_heads says.
  if (present(root, "head_dim")) {
    c.head_dim = require_size(root, "head_dim");
  } else {
    // GemmaConfig's own default is 256; every other family derives it.
    if (c.model_type == "gemma" || c.model_type == "gemma2") {
      c.head_dim = 256;
    } else {
      if (c.hidden_size % c.num_heads != 0) {
        root.fail("num_attention_heads",
                  "is " + std::to_string(c.num_heads) + ", which does not divide hidden_size " +
                      std::to_string(c.hidden_size),
                  "a divisor of hidden_size, or a head_dim key");
      }
      c.head_dim = c.hidden_size / c.num_heads;
    }
  }
  c.num_kv_heads = present(root, "num_key_value_heads") ? require_size(root, "num_key_value_heads") : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0) {
    root.fail("num_key_value_heads",
              "is " + std::to_string(c.num_kv_heads) + ", which does not divide num_attention_heads " +
                  std::to_string(c.num_heads),
              "a divisor of num_attention_heads (grouped-query attention)");
  }
  c.vocab_size = require_size(root, "vocab_size");
  c.max_positions = require_size(root, "max_position_embeddings");
  c.tie_embeddings = present(root, "tie_word_embeddings") ? root.require_bool("tie_word_embeddings")
                                                          : family.tie_default;
  const bool moe = c.model_type == "mixtral" || c.model_type == "qwen2_moe";
  // A MoE model's dense width is only used by dense layers (Qwen2-MoE's mlp_only_layers).
  if (!moe || present(root, "intermediate_size")) c.intermediate_size = require_size(root, "intermediate_size");

  if (c.model_type == "llama") {
    const bool attention_bias = present(root, "attention_bias") && root.require_bool("attention_bias");
    c.qkv_bias = c.o_bias = attention_bias;
    c.mlp_bias = present(root, "mlp_bias") && root.require_bool("mlp_bias");
  } else if (c.model_type == "qwen2" || c.model_type == "qwen2_moe") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False
  } else if (c.model_type == "gemma" || c.model_type == "gemma2") {
    c.scaled_embeddings = true;
    // Gemma2Config.attention_bias defaults to False; a config that sets it true is not built.
    if (present(root, "attention_bias") && root.require_bool("attention_bias")) {
      root.fail("attention_bias", "is true, which is not built for " + c.model_type, "false or absent");
    }
    if (c.model_type == "gemma2") {
      c.sandwich_norms = true;
      c.final_logit_softcap = present(root, "final_logit_softcapping");
    } else {
      root.mark_known("final_logit_softcapping");
    }
  } else if (c.model_type == "phi3") {
    c.fused_qkv = true;
    c.fused_gate_up = true;
    c.residual_dropouts = true;
    // Phi3Config's defaults: 0.0.
    c.residual_dropout = read_dropout(root, "resid_pdrop", 0.0);
    c.embedding_dropout = read_dropout(root, "embd_pdrop", 0.0);
  }
  // GemmaConfig and Gemma2Config: hidden_activation, gelu_pytorch_tanh when unset; the others'
  // hidden_act defaults to silu. attention_dropout defaults to 0.0 in every family.
  const bool gemma = c.model_type == "gemma" || c.model_type == "gemma2";
  c.activation = gemma ? read_activation_function(root, "hidden_activation", ActivationFunction::kGeluTanh)
                       : read_activation_function(root, "hidden_act", ActivationFunction::kSilu);
  c.attention_dropout = read_dropout(root, "attention_dropout", 0.0);
  if (c.model_type != "llama" && c.model_type != "gemma" && c.model_type != "gemma2") {
    // Only LlamaConfig has these; other families' builders have no such switch.
    for (std::string_view key : {"attention_bias", "mlp_bias"}) {
      if (present(root, key) && root.require_bool(key)) {
        root.fail(key, "is true, but " + c.model_type + " has no such option", "false or absent");
      }
      root.mark_known(key);
    }
  }

  if (c.model_type == "mixtral") {
    // MixtralConfig: num_local_experts, num_experts_per_tok; every layer is sparse.
    c.num_experts = require_size(root, "num_local_experts");
    c.experts_per_token = root.require_int("num_experts_per_tok", 1, c.num_experts);
    c.expert_intermediate_size = c.intermediate_size;
    c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
  } else if (c.model_type == "qwen2_moe") {
    // Qwen2MoeDecoderLayer: sparse when the layer is not in mlp_only_layers and
    // (layer_idx + 1) % decoder_sparse_step == 0.
    c.num_experts = require_size(root, "num_experts");
    c.experts_per_token = root.require_int("num_experts_per_tok", 1, c.num_experts);
    c.expert_intermediate_size = require_size(root, "moe_intermediate_size");
    c.shared_expert_intermediate_size =
        present(root, "shared_expert_intermediate_size") ? require_size(root, "shared_expert_intermediate_size") : 0;
    const std::int64_t step = present(root, "decoder_sparse_step") ? require_size(root, "decoder_sparse_step") : 1;
    std::vector<bool> dense_only(static_cast<std::size_t>(c.num_layers), false);
    if (present(root, "mlp_only_layers")) {
      const YAML::Node list = root.raw("mlp_only_layers");
      if (!list.IsSequence()) root.fail("mlp_only_layers", "is not a list", "a list of layer indices, e.g. []");
      for (const auto& item : list) {
        std::int64_t layer = -1;
        try {
          layer = item.as<std::int64_t>();
        } catch (const YAML::Exception&) {
        }
        if (layer < 0 || layer >= c.num_layers) {
          root.fail("mlp_only_layers", "holds '" + (item.IsScalar() ? item.Scalar() : std::string("?")) +
                                           "', which is not a layer index",
                    "indices in [0, " + std::to_string(c.num_layers - 1) + "]");
        }
        dense_only[static_cast<std::size_t>(layer)] = true;
      }
    }
    c.sparse_layers.resize(static_cast<std::size_t>(c.num_layers));
    bool any_dense = false;
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
      const bool sparse = !dense_only[static_cast<std::size_t>(i)] && (i + 1) % step == 0;
      c.sparse_layers[static_cast<std::size_t>(i)] = sparse;
      any_dense = any_dense || !sparse;
    }
    if (any_dense && c.intermediate_size == 0) {
      root.fail("intermediate_size", "is missing, but some layers have a dense MLP",
                "the dense MLP width (Qwen2MoeConfig.intermediate_size)");
    }
  }
  const double h = static_cast<double>(c.hidden_size);
  const double widest_mlp = static_cast<double>(
      std::max({c.intermediate_size, c.expert_intermediate_size, c.shared_expert_intermediate_size}));
  const double per_layer = 4.0 * h * static_cast<double>(c.num_heads * c.head_dim) +
                           3.0 * h * widest_mlp * static_cast<double>(c.num_experts + 2);
  const double estimate = static_cast<double>(c.num_layers) * per_layer + 2.0 * h * static_cast<double>(c.vocab_size);
  check_parameter_estimate(root, "hidden_size", estimate);
  // The module tree grows with layers x experts: bound it so a damaged config is an error, not
  // memory out of proportion to the file (far above any published model: Qwen1.5-MoE has 24 x 60).
  constexpr std::int64_t kMaxExpertModules = std::int64_t{1} << 20;
  if (c.num_layers * (c.num_experts + 1) > kMaxExpertModules) {
    root.fail(moe ? (c.model_type == "mixtral" ? "num_local_experts" : "num_experts") : "num_hidden_layers",
              "makes " + std::to_string(c.num_layers) + " layers x " + std::to_string(c.num_experts + 1) +
                  " MLPs, more than " + std::to_string(kMaxExpertModules),
              "num_hidden_layers x (experts + 1) <= 1,048,576");
  }
  return c;
}

ModelConfig read_gpt2(const YamlSection& root) {
  check_causal_lm(root, "GPT2LMHeadModel");
  ModelConfig c;
  c.architecture = Architecture::kGpt2;
  c.head = ModelHead::kLm;
  c.hidden_size = require_size(root, "n_embd");
  c.num_layers = root.require_int("n_layer", 1, kMaxLayers);
  c.num_heads = require_size(root, "n_head");
  c.num_kv_heads = c.num_heads;
  c.vocab_size = require_size(root, "vocab_size");
  c.max_positions = require_size(root, "n_positions");
  if (c.hidden_size % c.num_heads != 0) {
    root.fail("n_head", "does not divide n_embd " + std::to_string(c.hidden_size), "a divisor of n_embd");
  }
  // GPT2Config: n_inner = None means 4 * n_embd.
  c.intermediate_size = present(root, "n_inner") ? require_size(root, "n_inner") : 4 * c.hidden_size;
  c.tie_embeddings = present(root, "tie_word_embeddings") ? root.require_bool("tie_word_embeddings") : true;
  // GPT2Config's defaults: gelu_new, and 0.1 for each dropout.
  c.activation = read_activation_function(root, "activation_function", ActivationFunction::kGeluNew);
  c.hidden_dropout = read_dropout(root, "resid_pdrop", 0.1);
  c.attention_dropout = read_dropout(root, "attn_pdrop", 0.1);
  c.embedding_dropout = read_dropout(root, "embd_pdrop", 0.1);
  return c;
}

ModelConfig read_bert(const YamlSection& root) {
  ModelConfig c;
  c.architecture = Architecture::kBert;
  const std::string head = first_architecture(root);
  if (head.empty() || head == "BertModel") {
    c.head = ModelHead::kNone;
  } else if (head == "BertForMaskedLM") {
    c.head = ModelHead::kMlm;
  } else if (head == "BertForQuestionAnswering") {
    c.head = ModelHead::kQa;
  } else {
    root.fail("architectures", "names " + head + ", which is not built",
              "[\"BertModel\"], [\"BertForMaskedLM\"] or [\"BertForQuestionAnswering\"]");
  }
  c.hidden_size = require_size(root, "hidden_size");
  c.num_layers = root.require_int("num_hidden_layers", 1, kMaxLayers);
  c.num_heads = require_size(root, "num_attention_heads");
  c.num_kv_heads = c.num_heads;
  if (c.hidden_size % c.num_heads != 0) {
    root.fail("num_attention_heads", "does not divide hidden_size " + std::to_string(c.hidden_size),
              "a divisor of hidden_size");
  }
  c.intermediate_size = require_size(root, "intermediate_size");
  c.vocab_size = require_size(root, "vocab_size");
  c.max_positions = require_size(root, "max_position_embeddings");
  c.type_vocab_size = present(root, "type_vocab_size") ? require_size(root, "type_vocab_size") : 2;
  if (c.head == ModelHead::kMlm) {
    c.tie_embeddings = present(root, "tie_word_embeddings") ? root.require_bool("tie_word_embeddings") : true;
  } else {
    root.mark_known("tie_word_embeddings");
  }
  // BertConfig's defaults: gelu, 0.1; the embeddings' dropout is hidden_dropout_prob's.
  c.activation = read_activation_function(root, "hidden_act", ActivationFunction::kGelu);
  c.hidden_dropout = c.embedding_dropout = read_dropout(root, "hidden_dropout_prob", 0.1);
  c.attention_dropout = read_dropout(root, "attention_probs_dropout_prob", 0.1);
  return c;
}

std::string joined_types() {
  std::string out;
  for (const auto& type : hf_model_types()) out += (out.empty() ? "" : ", ") + type;
  return out;
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> out;
    for (const auto& family : kDecoderFamilies) out.emplace_back(family.model_type);
    out.emplace_back("gpt2");
    out.emplace_back("bert");
    return out;
  }();
  return types;
}

bool is_hf_config_reference(const std::filesystem::path& path) {
  std::error_code ec;
  return path.extension() == ".json" || std::filesystem::is_directory(path, ec);
}

std::filesystem::path hf_config_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path file =
      std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError({file.string(), 0}, "model", "config.json '" + file.string() + "' not found",
                     "a Hugging Face config.json, or a folder holding one");
  }
  return file;
}

ModelSpec load_hf_config(const std::filesystem::path& path, DType dtype, AttentionImpl attention,
                         std::vector<std::string>* notes) {
  const std::filesystem::path file = hf_config_file(path);
  const YamlSection root = load_json_section(file);
  const std::string name = file.filename() == "config.json" && file.has_parent_path() &&
                                   !file.parent_path().filename().empty()
                               ? file.parent_path().filename().string()
                               : file.stem().string();
  if (!root.has("model_type")) {
    root.fail("model_type", "is missing", "one of " + joined_types());
  }
  const std::string type = root.require_string("model_type");
  std::vector<std::string> no_effect;
  for (const std::string_view key : kNoEffectKeys) {
    if (root.has(key)) {
      root.mark_known(key);
      no_effect.emplace_back(key);
    }
  }
  for (const std::string_view key : kFamilyKeys) {
    if (root.has(key) && !family_reads(type, key)) {
      root.mark_known(key);
      no_effect.emplace_back(key);
    }
  }

  ModelSpec spec;
  const auto family = std::find_if(std::begin(kDecoderFamilies), std::end(kDecoderFamilies),
                                   [&](const DecoderFamily& f) { return f.model_type == type; });
  if (family != std::end(kDecoderFamilies)) {
    const HfDecoderConfig config = read_decoder(root, *family);
    root.finish();
    spec = build_hf_decoder_model(config, name, dtype, attention);
    mark_token_id_modules(spec);
  } else if (type == "gpt2" || type == "bert") {
    const ModelConfig config = type == "gpt2" ? read_gpt2(root) : read_bert(root);
    const double h = static_cast<double>(config.hidden_size);
    check_parameter_estimate(
        root, type == "gpt2" ? "n_embd" : "hidden_size", static_cast<double>(config.num_layers) * (4.0 * h * h + 2.0 * h * static_cast<double>(config.intermediate_size)) +
                  h * static_cast<double>(config.vocab_size + config.max_positions + config.type_vocab_size));
    root.finish();
    spec = build_model(config, name, dtype, attention);  // marks token-id modules itself
  } else {
    root.fail("model_type", "is '" + type + "', which is not supported",
              "one of " + joined_types(), closest_match(type, hf_model_types()));
  }
  if (notes && !no_effect.empty()) {
    std::string line = "config.json keys without effect on the simulation (" + file.string() + "):";
    for (const auto& key : no_effect) line += " " + key;
    notes->push_back(line);
  }
  return spec;
}

}  // namespace prefetchlab::core
