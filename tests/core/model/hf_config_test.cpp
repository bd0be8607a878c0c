// Hugging Face config.json models: the bundled configs (models/hf/) reproduce their published
// parameter totals, the families' distinguishing structure is built as transformers builds it,
// and bad configs are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/model/hf_config.hpp"
#include "core/model/model_config.hpp"
#include "tests/core/model/published_counts.hpp"
#include "tests/support/input_error_testing.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;

namespace {

const std::filesystem::path kHfDir = std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "models" / "hf";

pc::ModelSpec hf(const std::string& name) {
  return pc::load_hf_config(kHfDir / (name + ".json"), pc::DType::kBF16);
}

const pc::ModuleSpec& module(const pc::ModelSpec& spec, const std::string& name) {
  for (const auto& m : spec.modules) {
    if (m.name == name) return m;
  }
  ADD_FAILURE() << "no module " << name;
  return spec.modules.front();
}

std::vector<std::string> param_names(const pc::ModelSpec& spec, const std::string& module_name) {
  std::vector<std::string> out;
  for (const int id : module(spec, module_name).param_ids) out.push_back(spec.params[static_cast<std::size_t>(id)].name);
  return out;
}

std::int64_t param_numel(const pc::ModelSpec& spec, const std::string& name) {
  for (const auto& p : spec.params) {
    if (p.name == name) return p.numel;
  }
  ADD_FAILURE() << "no parameter " << name;
  return -1;
}

std::vector<std::string> children(const pc::ModelSpec& spec, const std::string& name) {
  std::vector<std::string> out;
  for (const int c : module(spec, name).children) out.push_back(spec.modules[static_cast<std::size_t>(c)].name);
  return out;
}

std::filesystem::path write_config(const std::string& dir_name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("prefetchlab_hf_" + dir_name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  return dir;
}

}  // namespace

TEST(HfConfig, EveryBundledConfigMatchesItsPublishedTotal) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(kHfDir)) {
    if (entry.path().extension() == ".json") found.push_back(entry.path().stem().string());
  }
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), prefetchlab::testing::kPublishedHfTotals.size()) << "every bundled config needs a published total";
  for (const auto& name : found) {
    ASSERT_TRUE(prefetchlab::testing::kPublishedHfTotals.count(name)) << name;
    EXPECT_EQ(hf(name).total_numel(), prefetchlab::testing::kPublishedHfTotals.at(name)) << name;
  }
}

TEST(HfConfig, Gpt2ConfigBuildsTheSameModelAsTheBundledYaml) {
  const pc::ModelSpec from_json = hf("gpt2");
  const pc::ModelSpec from_yaml = pc::load_model_file(
      std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "models/gpt2-small.yaml", pc::DType::kBF16);
  ASSERT_EQ(from_json.modules.size(), from_yaml.modules.size());
  ASSERT_EQ(from_json.params.size(), from_yaml.params.size());
  for (std::size_t i = 0; i < from_json.params.size(); ++i) {
    EXPECT_EQ(from_json.params[i].name, from_yaml.params[i].name);
    EXPECT_EQ(from_json.params[i].numel, from_yaml.params[i].numel);
  }
  for (std::size_t i = 0; i < from_json.modules.size(); ++i) {
    EXPECT_EQ(from_json.modules[i].name, from_yaml.modules[i].name);
    EXPECT_EQ(from_json.modules[i].forward_flops.per_token, from_yaml.modules[i].forward_flops.per_token);
  }
}

TEST(HfConfig, Qwen2HasBiasOnQkvOnly) {
  const pc::ModelSpec spec = hf("qwen2-7b");
  EXPECT_EQ(spec.architecture, "qwen2");
  for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
    const std::string m = std::string("model.layers.0.self_attn.") + proj;
    EXPECT_EQ(param_names(spec, m), (std::vector<std::string>{m + ".weight", m + ".bias"}));
  }
  EXPECT_EQ(param_names(spec, "model.layers.0.self_attn.o_proj"),
            std::vector<std::string>{"model.layers.0.self_attn.o_proj.weight"});
  EXPECT_EQ(param_numel(spec, "model.layers.0.self_attn.k_proj.bias"), 4 * 128);  // kv heads x head_dim
  EXPECT_EQ(module(spec, "").class_name, "Qwen2ForCausalLM");
}

TEST(HfConfig, Phi3FusesQkvAndGateUpAndCreatesOProjFirst) {
  const pc::ModelSpec spec = hf("phi-3-mini-4k-instruct");
  EXPECT_EQ(children(spec, "model.layers.0.self_attn"),
            (std::vector<std::string>{"model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj"}));
  EXPECT_EQ(children(spec, "model.layers.0.mlp"),
            (std::vector<std::string>{"model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.activation_fn",
                                      "model.layers.0.mlp.down_proj"}));
  EXPECT_EQ(param_numel(spec, "model.layers.0.self_attn.qkv_proj.weight"), 3072 * 3 * 3072);
  EXPECT_EQ(param_numel(spec, "model.layers.0.mlp.gate_up_proj.weight"), 3072 * 2 * 8192);
  // Phi3Attention.__init__ creates o_proj before qkv_proj: ds_ids follow creation.
  EXPECT_LT(module(spec, "model.layers.0.self_attn.o_proj").param_ids[0],
            module(spec, "model.layers.0.self_attn.qkv_proj").param_ids[0]);
  EXPECT_EQ(children(spec, "model.layers.0").back(), "model.layers.0.resid_mlp_dropout");
}

TEST(HfConfig, GemmaTiesTheHeadAndGemma2HasFourNormsPerLayer) {
  const pc::ModelSpec gemma = hf("gemma-7b");
  EXPECT_EQ(module(gemma, "lm_head").param_ids, module(gemma, "model.embed_tokens").param_ids);
  EXPECT_EQ(param_numel(gemma, "model.layers.0.self_attn.q_proj.weight"), 3072 * 16 * 256);  // head_dim 256
  const pc::ModelSpec gemma2 = hf("gemma-2-9b");
  EXPECT_EQ(children(gemma2, "model.layers.3"),
            (std::vector<std::string>{"model.layers.3.input_layernorm", "model.layers.3.self_attn",
                                      "model.layers.3.post_attention_layernorm",
                                      "model.layers.3.pre_feedforward_layernorm", "model.layers.3.mlp",
                                      "model.layers.3.post_feedforward_layernorm"}));
}

TEST(HfConfig, MixtralExpertsRunW1ActW3W2AndSeeTopKOfTheTokens) {
  const pc::ModelSpec spec = hf("mixtral-8x7b-v0.1");
  EXPECT_EQ(spec.num_experts, 8);
  EXPECT_EQ(spec.experts_per_token, 2);
  const std::string moe = "model.layers.0.block_sparse_moe";
  const auto kids = children(spec, moe);
  ASSERT_EQ(kids.size(), 9u);  // the router, then the 8 experts (the ModuleList's hooks never fire)
  EXPECT_EQ(kids[0], moe + ".gate");
  EXPECT_EQ(children(spec, moe + ".experts.7"),
            (std::vector<std::string>{moe + ".experts.7.w1", moe + ".experts.7.act_fn", moe + ".experts.7.w3",
                                      moe + ".experts.7.w2"}));
  // Each expert's GEMMs see top_k / num_experts = 1/4 of the tokens; the router sees them all.
  EXPECT_EQ(module(spec, moe + ".experts.0.w1").forward_flops.per_token, 2 * 4096 * 14336 / 4);
  EXPECT_EQ(module(spec, moe + ".gate").forward_flops.per_token, 2 * 4096 * 8);
}

TEST(HfConfig, Qwen2MoeHasASharedExpertAndItsGate) {
  const pc::ModelSpec spec = hf("qwen1.5-moe-a2.7b");
  const auto kids = children(spec, "model.layers.0.mlp");
  ASSERT_EQ(kids.size(), 1u + 60u + 2u);
  EXPECT_EQ(kids[61], "model.layers.0.mlp.shared_expert");
  EXPECT_EQ(kids[62], "model.layers.0.mlp.shared_expert_gate");
  EXPECT_EQ(param_numel(spec, "model.layers.0.mlp.shared_expert_gate.weight"), 2048);
  EXPECT_EQ(param_numel(spec, "model.layers.0.mlp.experts.59.down_proj.weight"), 1408 * 2048);
}

TEST(HfConfig, AFolderMeansItsConfigJsonAndNamesTheModel) {
  std::ifstream in(kHfDir / "mistral-7b-v0.1.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dir = write_config("my-mistral", text);
  const pc::ModelSpec spec = pc::load_hf_config(dir, pc::DType::kBF16);
  EXPECT_EQ(spec.name, "prefetchlab_hf_my-mistral");
  EXPECT_EQ(spec.total_numel(), 7'241'732'096);
  std::vector<std::string> notes;
  pc::load_hf_config(dir, pc::DType::kBF16, pc::AttentionImpl::kSdpa, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("rope_theta"), std::string::npos);
}

TEST(HfConfig, BadConfigsNameFileKeyAndTheSupportedTypes) {
  const auto unknown_type = write_config("falcon", "{\n  \"model_type\": \"falcon\",\n  \"hidden_size\": 64\n}\n");
  auto e = expect_input_error([&] { pc::load_hf_config(unknown_type, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "model_type");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_NE(e.where().file.find("config.json"), std::string::npos);
  for (const auto& type : pc::hf_model_types()) EXPECT_NE(e.expected().find(type), std::string::npos) << type;

  const auto missing = write_config("missing", "{\"model_type\": \"llama\", \"num_hidden_layers\": 2}");
  e = expect_input_error([&] { pc::load_hf_config(missing, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "hidden_size");
  EXPECT_NE(e.problem().find("missing"), std::string::npos);

  const auto no_type = write_config("no-type", "{\"hidden_size\": 64}");
  e = expect_input_error([&] { pc::load_hf_config(no_type, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "model_type");

  const auto misspelt = write_config(
      "misspelt", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                  "\"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 100, "
                  "\"max_position_embeddings\": 64, \"num_key_value_head\": 2}");
  e = expect_input_error([&] { pc::load_hf_config(misspelt, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "num_key_value_head");
  EXPECT_EQ(e.suggestion(), "num_key_value_heads");

  // Heads that split no hidden size are the head count's fault, not num_key_value_heads' (which
  // divides neither): issue 45.
  const auto odd_heads = write_config(
      "odd-heads", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                   "\"num_attention_heads\": 27, \"intermediate_size\": 128, \"vocab_size\": 100, "
                   "\"max_position_embeddings\": 64, \"num_key_value_heads\": 4}");
  e = expect_input_error([&] { pc::load_hf_config(odd_heads, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "num_attention_heads");
  EXPECT_NE(e.problem().find("does not divide hidden_size 64"), std::string::npos) << e.problem();

  const auto not_causal = write_config("seqcls", "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForSequenceClassification\"]}");
  e = expect_input_error([&] { pc::load_hf_config(not_causal, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "architectures");

  // Sizes a damaged file could hold: a clear error, not memory out of proportion to the file.
  const auto huge = write_config("huge", "{\"model_type\": \"gpt2\", \"n_embd\": 16000000, \"n_layer\": 60000, "
                                         "\"n_head\": 1, \"vocab_size\": 10, \"n_positions\": 10}");
  e = expect_input_error([&] { pc::load_hf_config(huge, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "n_embd");
  const auto many_experts = write_config(
      "many-experts", "{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_hidden_layers\": 60000, "
                      "\"num_attention_heads\": 4, \"intermediate_size\": 64, \"vocab_size\": 10, "
                      "\"max_position_embeddings\": 10, \"num_local_experts\": 1000, \"num_experts_per_tok\": 2}");
  e = expect_input_error([&] { pc::load_hf_config(many_experts, pc::DType::kBF16); });
  EXPECT_EQ(e.key(), "num_local_experts");

  e = expect_input_error([&] { pc::load_hf_config(kHfDir / "nope.json", pc::DType::kBF16); });
  EXPECT_NE(e.problem().find("not found"), std::string::npos);
}

namespace {

std::string scaled(const pc::TokenScaled& t) {
  return std::to_string(t.fixed) + "/" + std::to_string(t.per_token) + "/" + std::to_string(t.per_token_per_position);
}

// Every field of the tree that any executor or cost model reads, one line per parameter, module
// and kernel: two specs are the same model exactly when these are equal.
std::vector<std::string> spec_lines(const pc::ModelSpec& spec) {
  std::vector<std::string> out;
  out.push_back("shape " + std::to_string(spec.hidden_size) + " " + std::to_string(spec.num_layers) + " " +
                std::to_string(spec.num_heads) + " " + std::to_string(spec.num_kv_heads) + " " +
                std::to_string(spec.intermediate_size) + " " + std::to_string(spec.vocab_size) + " " +
                std::to_string(spec.max_positions) + " " + std::to_string(spec.causal));
  for (const auto& p : spec.params) {
    out.push_back("param " + p.name + " " + std::to_string(p.numel) + " " + std::to_string(p.gemm_in) + "x" +
                  std::to_string(p.gemm_out));
  }
  for (const auto& m : spec.modules) {
    std::string line = "module " + m.name + " " + m.class_name + " d" + std::to_string(m.depth) + " p" +
                       std::to_string(m.parent) + " hook" + std::to_string(m.post_backward_hook_fires) + " saves " +
                       scaled(m.activation_bytes) + " flops " + scaled(m.forward_flops) + " bytes " +
                       scaled(m.forward_bytes) + " params";
    for (const int id : m.param_ids) line += " " + std::to_string(id);
    out.push_back(line);
    for (const auto& k : m.kernels) {
      out.push_back("  kernel " + k.op + " " + pc::kernel_kind_name(k.kind) + " " + scaled(k.flops) + " " +
                    scaled(k.bytes) + " " + scaled(k.gemm_volume) + " " + std::to_string(k.gemm_n) + "x" +
                    std::to_string(k.gemm_k) + " bwd " + std::to_string(k.backward_kernels) + " " +
                    std::to_string(k.backward_flops_factor) + " " + std::to_string(k.backward_bytes_factor));
    }
  }
  return out;
}

}  // namespace

// One Llama builder: every bundled models/*.yaml Llama is the model HF builds from a
// LlamaForCausalLM config.json of the same numbers, field by field, under every attention.
TEST(HfConfig, LlamaYamlModelsAreTheirConfigJsonsModels) {
  const std::filesystem::path models = std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "models";
  int compared = 0;
  for (const std::string name : {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "tiny-llama"}) {
    SCOPED_TRACE(name);
    const auto yaml = pc::YamlSection::load_file((models / (name + ".yaml")).string());
    const pc::ModelConfig c = pc::load_model_config(yaml);
    ASSERT_EQ(c.architecture, pc::Architecture::kLlama);
    const std::string json =
        "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": " +
        std::to_string(c.hidden_size) + ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
        ", \"num_attention_heads\": " + std::to_string(c.num_heads) + ", \"num_key_value_heads\": " +
        std::to_string(c.num_kv_heads) + ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
        ", \"vocab_size\": " + std::to_string(c.vocab_size) + ", \"max_position_embeddings\": " +
        std::to_string(c.max_positions) + ", \"tie_word_embeddings\": " + (c.tie_embeddings ? "true" : "false") +
        ", \"attention_bias\": " + (c.bias ? "true" : "false") + ", \"mlp_bias\": " + (c.bias ? "true" : "false") + "}";
    const auto dir = write_config("llama-parity-" + name, json);
    for (const auto attention : {pc::AttentionImpl::kSdpa, pc::AttentionImpl::kEager, pc::AttentionImpl::kFlash}) {
      const auto from_yaml = spec_lines(pc::load_model_file(models / (name + ".yaml"), pc::DType::kBF16, attention));
      const auto from_json = spec_lines(pc::load_hf_config(dir, pc::DType::kBF16, attention));
      ASSERT_EQ(from_yaml.size(), from_json.size());
      for (std::size_t i = 0; i < from_yaml.size(); ++i) ASSERT_EQ(from_yaml[i], from_json[i]) << "line " << i;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 18);
}
