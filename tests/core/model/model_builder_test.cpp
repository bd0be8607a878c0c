// Model files, the GPT-2 / BERT / Llama builders and the persistence rule. Published counts
// (the models' cards and papers) and per-layer numbers (Hugging Face transformers' modeling files).
#include <gtest/gtest.h>

#include "tests/support/input_error_testing.hpp"

#include "tests/core/model/published_counts.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model_builders.hpp"
#include "core/model/model_config.hpp"
#include "core/zero/persistence.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;

namespace {

const std::filesystem::path kModelsDir = std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "models";

pc::ModelSpec bundled(const std::string& name) {
  return pc::load_model_file(kModelsDir / (name + ".yaml"), pc::DType::kBF16);
}

pc::ModelConfig bundled_config(const std::string& name) {
  return pc::load_model_config(pc::YamlSection::load_file((kModelsDir / (name + ".yaml")).string()));
}

pc::YamlSection parse(const std::string& text) { return prefetchlab::testing::parse_yaml(text, "model.yaml"); }


int module_index(const pc::ModelSpec& spec, const std::string& name) {
  for (std::size_t i = 0; i < spec.modules.size(); ++i) {
    if (spec.modules[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no module " << name;
  return 0;
}

// Modules are stored in pre-order, so a subtree is the contiguous run below its root.
std::vector<int> subtree(const pc::ModelSpec& spec, int root) {
  std::vector<int> out{root};
  const int depth = spec.modules[static_cast<std::size_t>(root)].depth;
  for (std::size_t i = static_cast<std::size_t>(root) + 1;
       i < spec.modules.size() && spec.modules[i].depth > depth; ++i) {
    out.push_back(static_cast<int>(i));
  }
  return out;
}

// (name relative to `prefix`, class) of each module in a subtree, in execution order.
std::vector<std::pair<std::string, std::string>> subtree_order(const pc::ModelSpec& spec,
                                                               const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const int i : subtree(spec, module_index(spec, prefix))) {
    const auto& m = spec.modules[static_cast<std::size_t>(i)];
    out.emplace_back(m.name.substr(prefix.size()), m.class_name);
  }
  return out;
}

std::int64_t linear_flops_per_token(const pc::ModelSpec& spec, const std::string& prefix) {
  std::int64_t total = 0;
  for (const int i : subtree(spec, module_index(spec, prefix))) {
    const auto& m = spec.modules[static_cast<std::size_t>(i)];
    if (m.class_name == "Linear" || m.class_name == "Conv1D") total += m.forward_flops.per_token;
  }
  return total;
}


}  // namespace

TEST(ModelBuilder, EveryBundledModelMatchesItsPublishedParameterCount) {
  const auto names = pc::bundled_model_names(kModelsDir);
  ASSERT_EQ(names.size(), prefetchlab::testing::kPublishedTotals.size());
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(prefetchlab::testing::kPublishedTotals.count(name)) << "add the published total for " << name;
    const pc::ModelSpec spec = bundled(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_EQ(spec.total_numel(), prefetchlab::testing::kPublishedTotals.at(name));
  }
}

TEST(ModelBuilder, BundledNamesAreSortedStems) {
  const auto names = pc::bundled_model_names(kModelsDir);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "bert-base");
  EXPECT_NE(std::find(names.begin(), names.end(), "tiny-llama"), names.end());
}

TEST(ModelBuilder, OneMoreLayerAddsExactlyOneLayersParameters) {
  const std::map<std::string, std::int64_t> per_layer = {
      {"gpt2-small", 7'087'872},     {"gpt2-xl", 30'740'800},      {"bert-base", 7'087'872},
      {"bert-large-qa", 12'596'224}, {"llama-2-7b", 202'383'360},  {"llama-2-70b", 855'654'400},
      {"llama-3-8b", 218'112'000},
  };
  for (const auto& [name, layer_numel] : per_layer) {
    SCOPED_TRACE(name);
    pc::ModelConfig config = bundled_config(name);
    const std::int64_t before = pc::build_model(config, name, pc::DType::kBF16).total_numel();
    config.num_layers += 1;
    const std::int64_t after = pc::build_model(config, name, pc::DType::kBF16).total_numel();
    EXPECT_EQ(after - before, layer_numel);
  }
}

TEST(ModelBuilder, LlamaTopLevelAndDecoderLayerRunInHfForwardOrder) {
  const pc::ModelSpec spec = bundled("llama-2-7b");
  ASSERT_GE(spec.modules.size(), 5u);
  EXPECT_EQ(spec.modules[0].name, "");
  EXPECT_EQ(spec.modules[0].class_name, "LlamaForCausalLM");
  EXPECT_EQ(spec.modules[1].name, "model");
  EXPECT_EQ(spec.modules[2].name, "model.embed_tokens");
  EXPECT_EQ(spec.modules[3].name, "model.rotary_emb");
  EXPECT_EQ(spec.modules[4].name, "model.layers.0");
  EXPECT_EQ(spec.modules[4].depth, 2);  // ModuleList `layers` never runs, so it is no module
  EXPECT_EQ(spec.modules[spec.modules.size() - 2].name, "model.norm");
  EXPECT_EQ(spec.modules.back().name, "lm_head");

  const std::vector<std::pair<std::string, std::string>> expected = {
      {"", "LlamaDecoderLayer"},
      {".input_layernorm", "LlamaRMSNorm"},
      {".self_attn", "LlamaSdpaAttention"},
      {".self_attn.q_proj", "Linear"},
      {".self_attn.k_proj", "Linear"},
      {".self_attn.v_proj", "Linear"},
      {".self_attn.o_proj", "Linear"},
      {".post_attention_layernorm", "LlamaRMSNorm"},
      {".mlp", "LlamaMLP"},
      {".mlp.gate_proj", "Linear"},
      {".mlp.act_fn", "SiLU"},
      {".mlp.up_proj", "Linear"},
      {".mlp.down_proj", "Linear"},
  };
  EXPECT_EQ(subtree_order(spec, "model.layers.7"), expected);
  // 4 top modules (root, model, embed_tokens, rotary_emb) + layers + norm + lm_head.
  EXPECT_EQ(spec.modules.size(), 4 + 32 * expected.size() + 2);
}

TEST(ModelBuilder, Gpt2BlockRunsInHfForwardOrderWithoutAttnDropout) {
  const pc::ModelSpec spec = bundled("gpt2-small");
  EXPECT_EQ(spec.modules[0].class_name, "GPT2LMHeadModel");
  EXPECT_EQ(spec.modules[1].name, "transformer");
  EXPECT_EQ(spec.modules[2].name, "transformer.wte");
  EXPECT_EQ(spec.modules[3].name, "transformer.wpe");
  EXPECT_EQ(spec.modules[4].name, "transformer.drop");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"", "GPT2Block"},
      {".ln_1", "LayerNorm"},
      {".attn", "GPT2SdpaAttention"},
      {".attn.c_attn", "Conv1D"},
      {".attn.c_proj", "Conv1D"},
      {".attn.resid_dropout", "Dropout"},
      {".ln_2", "LayerNorm"},
      {".mlp", "GPT2MLP"},
      {".mlp.c_fc", "Conv1D"},
      {".mlp.act", "NewGELUActivation"},
      {".mlp.c_proj", "Conv1D"},
      {".mlp.dropout", "Dropout"},
  };
  EXPECT_EQ(subtree_order(spec, "transformer.h.0"), expected);
}

// DeepSpeed's post-backward hook never fires for modules fed only token ids (recorded on real
// DeepSpeed ZeRO-3: the root, wte and wpe are fetched in backward but never released there).
TEST(ModelBuilder, PostBackwardHookSkipsModulesFedOnlyTokenIds) {
  const auto fires = [](const pc::ModelSpec& spec) {
    std::vector<std::string> skipped;
    for (const auto& m : spec.modules) {
      if (!m.post_backward_hook_fires) skipped.push_back(m.name);
    }
    return skipped;
  };
  EXPECT_EQ(fires(bundled("gpt2-small")),
            (std::vector<std::string>{"", "transformer", "transformer.wte", "transformer.wpe"}));
  EXPECT_EQ(fires(bundled("tiny-llama")), (std::vector<std::string>{"", "model", "model.embed_tokens"}));
  EXPECT_EQ(fires(bundled("bert-base-qa")),
            (std::vector<std::string>{"", "bert", "bert.embeddings", "bert.embeddings.word_embeddings",
                                      "bert.embeddings.token_type_embeddings",
                                      "bert.embeddings.position_embeddings"}));
}

TEST(ModelBuilder, BertTaskHeadsNestBertModelAndDropThePooler) {
  const pc::ModelSpec bare = bundled("bert-base");
  EXPECT_EQ(bare.modules[0].class_name, "BertModel");
  EXPECT_EQ(bare.modules[1].name, "embeddings");
  EXPECT_EQ(bare.modules.back().name, "pooler.activation");
  EXPECT_FALSE(bare.causal);

  const pc::ModelSpec qa = bundled("bert-base-qa");
  EXPECT_EQ(qa.modules[0].class_name, "BertForQuestionAnswering");
  EXPECT_EQ(qa.modules[1].name, "bert");
  EXPECT_EQ(qa.modules.back().name, "qa_outputs");
  for (const auto& m : qa.modules) EXPECT_EQ(m.name.find("pooler"), std::string::npos) << m.name;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"", "BertLayer"},
      {".attention", "BertAttention"},
      {".attention.self", "BertSdpaSelfAttention"},
      {".attention.self.query", "Linear"},
      {".attention.self.key", "Linear"},
      {".attention.self.value", "Linear"},
      {".attention.output", "BertSelfOutput"},
      {".attention.output.dense", "Linear"},
      {".attention.output.dropout", "Dropout"},
      {".attention.output.LayerNorm", "LayerNorm"},
      {".intermediate", "BertIntermediate"},
      {".intermediate.dense", "Linear"},
      {".intermediate.intermediate_act_fn", "GELUActivation"},
      {".output", "BertOutput"},
      {".output.dense", "Linear"},
      {".output.dropout", "Dropout"},
      {".output.LayerNorm", "LayerNorm"},
  };
  EXPECT_EQ(subtree_order(qa, "bert.encoder.layer.3"), expected);
  // BertEmbeddings.forward looks up token types before positions.
  EXPECT_EQ(qa.modules[3].name, "bert.embeddings.word_embeddings");
  EXPECT_EQ(qa.modules[4].name, "bert.embeddings.token_type_embeddings");
  EXPECT_EQ(qa.modules[5].name, "bert.embeddings.position_embeddings");
}

TEST(ModelBuilder, TiedWeightIsOneParameterUsedByTwoModules) {
  const pc::ModelSpec spec = bundled("gpt2-small");
  const auto& wte = spec.modules[static_cast<std::size_t>(module_index(spec, "transformer.wte"))];
  const auto& head = spec.modules[static_cast<std::size_t>(module_index(spec, "lm_head"))];
  ASSERT_EQ(wte.param_ids.size(), 1u);
  EXPECT_EQ(wte.param_ids, head.param_ids);
  const auto& param = spec.params[static_cast<std::size_t>(wte.param_ids[0])];
  EXPECT_EQ(param.name, "transformer.wte.weight");
  EXPECT_EQ(param.gemm_in, 768);     // it is also the lm_head GEMM weight
  EXPECT_EQ(param.gemm_out, 50257);
  std::int64_t direct_sum = 0;
  for (std::size_t i = 0; i < spec.modules.size(); ++i) direct_sum += spec.direct_numel(static_cast<int>(i));
  EXPECT_EQ(direct_sum - spec.total_numel(), 50257 * 768);  // counted twice only as direct params

  // An untied GPT-2 gets its own lm_head weight, created last.
  pc::ModelConfig config = bundled_config("gpt2-small");
  config.tie_embeddings = false;
  const pc::ModelSpec untied = pc::build_model(config, "untied", pc::DType::kBF16);
  EXPECT_EQ(untied.total_numel(), 124'439'808 + 50257 * 768);
  EXPECT_EQ(untied.params.back().name, "lm_head.weight");
}

TEST(ModelBuilder, BertMlmTiesDecoderWeightAndSharesTheHeadBias) {
  auto root = parse(
      "architecture: bert\nhead: mlm\nhidden_size: 768\nnum_layers: 12\nnum_heads: 12\n"
      "intermediate_size: 3072\nvocab_size: 30522\nmax_positions: 512\n");
  const pc::ModelSpec spec = pc::build_model(pc::load_model_config(root), "bert-mlm", pc::DType::kBF16);
  EXPECT_EQ(spec.modules[0].class_name, "BertForMaskedLM");
  // BertModel without pooler + transform dense and LayerNorm + decoder bias (transformers models/bert/modeling_bert.py).
  EXPECT_EQ(spec.total_numel(), 109'482'240 - 590'592 + 590'592 + 1'536 + 30'522);
  const auto& decoder = spec.modules[static_cast<std::size_t>(module_index(spec, "cls.predictions.decoder"))];
  const auto& predictions = spec.modules[static_cast<std::size_t>(module_index(spec, "cls.predictions"))];
  ASSERT_EQ(decoder.param_ids.size(), 2u);
  EXPECT_EQ(spec.params[static_cast<std::size_t>(decoder.param_ids[0])].name,
            "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(decoder.param_ids[0], 0);
  EXPECT_EQ(predictions.param_ids, std::vector<int>{decoder.param_ids[1]});
  EXPECT_EQ(spec.params.back().name, "cls.predictions.bias");
}

TEST(ModelBuilder, DsIdsFollowCreationOrderNotExecutionOrder) {
  const pc::ModelSpec spec = bundled("llama-2-7b");
  const std::string p = "model.layers.0.";
  const std::vector<std::string> creation = {
      "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
      "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
      "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};
  EXPECT_EQ(spec.params[0].name, "model.embed_tokens.weight");
  for (std::size_t i = 0; i < creation.size(); ++i) EXPECT_EQ(spec.params[1 + i].name, p + creation[i]);
  EXPECT_EQ(spec.params.back().name, "lm_head.weight");
  EXPECT_EQ(spec.params[spec.params.size() - 2].name, "model.norm.weight");

  // In execution order the first parameter used by layer 0 is input_layernorm (ds_id 8).
  std::vector<int> used;
  for (const int i : subtree(spec, module_index(spec, "model.layers.0"))) {
    for (const int id : spec.modules[static_cast<std::size_t>(i)].param_ids) used.push_back(id);
  }
  EXPECT_EQ(used, (std::vector<int>{8, 1, 2, 3, 4, 9, 5, 6, 7}));

  const auto& q = spec.params[1];
  EXPECT_EQ(q.gemm_in, 4096);
  EXPECT_EQ(q.gemm_out, 4096);
  EXPECT_EQ(spec.params[8].gemm_in, 0);  // norms are not GEMM weights
  const pc::ModelSpec gqa = bundled("llama-3-8b");
  EXPECT_EQ(gqa.params[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(gqa.params[2].gemm_out, 1024);  // 8 kv heads * head_dim 128
}

TEST(ModelBuilder, LinearForwardFlopsPerLayerAndLmHead) {
  const std::map<std::string, std::int64_t> per_layer = {
      {"llama-2-7b", 404'750'336}, {"llama-3-8b", 436'207'616},
      {"llama-2-70b", 1'711'276'032}, {"llama-3-70b", 1'711'276'032}};
  for (const auto& [name, flops] : per_layer) {
    SCOPED_TRACE(name);
    const pc::ModelSpec spec = bundled(name);
    EXPECT_EQ(linear_flops_per_token(spec, "model.layers.0"), flops);
    EXPECT_EQ(linear_flops_per_token(spec, "model.layers.1"), flops);
    const auto& head = spec.modules.back();
    EXPECT_EQ(head.forward_flops.per_token, 2 * spec.vocab_size * spec.hidden_size);
  }
  EXPECT_EQ(bundled("llama-2-7b").modules.back().forward_flops.per_token, 262'144'000);
  EXPECT_EQ(bundled("llama-3-8b").modules.back().forward_flops.per_token, 1'050'673'152);
}

TEST(ModelBuilder, AttentionCoreIsHalvedForCausalModels) {
  // 4*s*h per token per position (QK^T + AV); causal kernels skip about half (FlashAttention's causal FLOP count, Dao 2023, arXiv:2307.08691).
  const pc::ModelSpec llama = bundled("llama-2-7b");
  EXPECT_EQ(llama.modules[static_cast<std::size_t>(module_index(llama, "model.layers.0.self_attn"))]
                .forward_flops.per_token_per_position,
            2 * 4096);
  const pc::ModelSpec bert = bundled("bert-base");
  EXPECT_EQ(bert.modules[static_cast<std::size_t>(module_index(bert, "encoder.layer.0.attention.self"))]
                .forward_flops.per_token_per_position,
            4 * 768);
  // Whole-model forward at b=1, s=1024 is dominated by 2 * (matmul params) per token.
  const double flops = static_cast<double>(llama.forward_flops(1, 1024));
  const double linear = 1024.0 * (32 * 404'750'336.0 + 262'144'000.0);
  EXPECT_GT(flops, linear);
  EXPECT_LT(flops, linear * 1.1);
}

TEST(ModelBuilder, KorthikantiActivationBytesPerGptAndBertLayer) {
  // Eager attention: sbh(34 + 5as/h) bytes per layer: per token 34h, per token per position 5a.
  // sdpa keeps no s^2 tensor but its output (2h) and log-sum-exp (4 bytes per head): 36h + 4a.
  // The formula's GELU keeps only its input; HF GPT-2's NewGELUActivation (gelu_new) runs op by
  // op and autograd keeps three more tensors of its width 4h: 24h more per token.
  for (const auto& [name, prefix] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2-medium", "transformer.h.5"}, {"bert-large", "encoder.layer.5"}}) {
    SCOPED_TRACE(name);
    for (const auto attention : {pc::AttentionImpl::kEager, pc::AttentionImpl::kSdpa}) {
      const pc::ModelSpec spec = pc::load_model_file(kModelsDir / (name + ".yaml"), pc::DType::kBF16, attention);
      pc::TokenScaled saved;
      for (const int i : subtree(spec, module_index(spec, prefix))) {
        saved += spec.modules[static_cast<std::size_t>(i)].activation_bytes;
      }
      const bool eager = attention == pc::AttentionImpl::kEager;
      const std::int64_t gelu_new = name.starts_with("gpt2") ? 24 * spec.hidden_size : 0;
      EXPECT_EQ(saved.fixed, 0);
      EXPECT_EQ(saved.per_token, gelu_new + (eager ? 34 * spec.hidden_size : 36 * spec.hidden_size + 4 * spec.num_heads));
      EXPECT_EQ(saved.per_token_per_position, eager ? 5 * spec.num_heads : 0);
    }
  }
  // Our itemised Llama estimate (after Korthikanti et al., arXiv:2205.05198): sbh(14 + 4kv/a) + 6sbf + 4asb.
  const pc::ModelSpec llama = bundled("llama-2-7b");
  pc::TokenScaled saved;
  for (const int i : subtree(llama, module_index(llama, "model.layers.0"))) {
    saved += llama.modules[static_cast<std::size_t>(i)].activation_bytes;
  }
  EXPECT_EQ(saved.per_token, 18 * 4096 + 6 * 11008 + 4 * 32);
}

TEST(Persistence, DefaultThresholdMarksNormsAndBiasesOnly) {
  for (const std::string name : {"llama-2-7b", "gpt2-small", "llama-3-70b"}) {
    SCOPED_TRACE(name);
    const pc::ModelSpec spec = bundled(name);
    const auto persistent =
        pc::persistent_params(spec, 100'000, std::numeric_limits<std::int64_t>::max());
    ASSERT_EQ(persistent.size(), spec.params.size());
    int count = 0;
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const std::string& n = spec.params[i].name;
      const bool norm_or_bias = n.find("norm") != std::string::npos || n.find(".ln_") != std::string::npos ||
                                n.ends_with(".bias");
      EXPECT_EQ(persistent[i], norm_or_bias) << n;
      count += persistent[i] ? 1 : 0;
    }
    EXPECT_GT(count, 0);
  }
}

TEST(Persistence, ModelThresholdSkipsParamsThatWouldOverflowIt) {
  pc::ModelSpec spec;
  for (const std::int64_t numel : {10, 50, 30, 200, 5}) spec.params.push_back({"p", numel});
  // Param threshold 100 rules out 200; the model budget 60 takes 10 and 50, skips 30
  // (10 + 50 + 30 > 60), and still takes 5 afterwards (walk continues).
  EXPECT_EQ(pc::persistent_params(spec, 100, 65), (std::vector<bool>{true, true, false, false, true}));
  EXPECT_EQ(pc::persistent_params(spec, 0, 1000), (std::vector<bool>(5, false)));
}

TEST(ModelFile, LoadsFromDiskAndNamesTheModelAfterTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "prefetchlab_model_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "my-model.yaml";
  {
    std::ofstream out(file);
    out << "architecture: gpt2\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\n"
           "vocab_size: 100\nmax_positions: 32\n";
  }
  const pc::ModelSpec spec = pc::load_model_file(file, pc::DType::kFP32);
  EXPECT_EQ(spec.name, "my-model");
  EXPECT_EQ(spec.intermediate_size, 256);  // gpt2 default 4 * hidden
  EXPECT_EQ(spec.params[0].dtype, pc::DType::kFP32);
  EXPECT_EQ(pc::dtype_bytes(spec.params[0].dtype), 4);
  EXPECT_STREQ(pc::dtype_name(pc::DType::kBF16), "bf16");

  {
    std::ofstream out(file);
    out << "architecture: gpt2\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\n"
           "vocab_size: 100\nmax_positons: 32\n";
  }
  const auto e = expect_input_error([&] { pc::load_model_file(file, pc::DType::kBF16); });
  EXPECT_EQ(e.where().file, file.string());
  EXPECT_EQ(e.where().line, 6);
  EXPECT_EQ(e.key(), "max_positons");  // reported as misspelt, not as max_positions missing
  EXPECT_EQ(e.suggestion(), "max_positions");
  std::filesystem::remove_all(dir);
}

namespace {
struct BadCase {
  const char* what;
  std::string yaml;
  int line;
  std::string key;
  std::string suggestion;  // "" when none is expected
};

const std::string kLlamaHead = "architecture: llama\n";
const std::string kLlamaBody =
    "hidden_size: 256\nnum_layers: 2\nnum_heads: 8\nintermediate_size: 688\n"
    "vocab_size: 1000\nmax_positions: 64\n";
}  // namespace

TEST(ModelFile, BadInputsNameFileLineAndKey) {
  const std::vector<BadCase> cases = {
      {"unknown key with suggestion", kLlamaHead + kLlamaBody + "num_kv_head: 4\n", 8, "num_kv_head",
       "num_kv_heads"},
      {"wrong type", kLlamaHead + "hidden_size: wide\nnum_layers: 2\nnum_heads: 8\n", 2,
       "hidden_size", ""},
      {"negative size", kLlamaHead + "hidden_size: 256\nnum_layers: -2\n", 3, "num_layers", ""},
      {"zero size", kLlamaHead + kLlamaBody + "num_kv_heads: 0\n", 8, "num_kv_heads", ""},
      {"heads not dividing hidden",
       kLlamaHead + "hidden_size: 256\nnum_layers: 2\nnum_heads: 7\nintermediate_size: 688\n"
                    "vocab_size: 1000\nmax_positions: 64\n",
       4, "num_heads", ""},
      {"kv heads not dividing heads", kLlamaHead + kLlamaBody + "num_kv_heads: 3\n", 8,
       "num_kv_heads", ""},
      {"unknown architecture with suggestion", "architecture: lama\n" + kLlamaBody, 1,
       "architecture", "llama"},
      {"missing required key",
       kLlamaHead + "hidden_size: 256\nnum_layers: 2\nnum_heads: 8\nvocab_size: 1000\n"
                    "max_positions: 64\n",
       1, "intermediate_size", ""},
      {"key not used by the architecture", kLlamaHead + kLlamaBody + "type_vocab_size: 2\n", 8,
       "type_vocab_size", ""},
      {"kv heads on gpt2",
       "architecture: gpt2\nnum_kv_heads: 4\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\n", 2,
       "num_kv_heads", ""},
      {"head of another architecture", "architecture: bert\nhead: causal_lm\n" + kLlamaBody, 2,
       "head", ""},
      {"tie_embeddings on a bert without an LM head",
       "architecture: bert\nhead: qa\n" + kLlamaBody + "tie_embeddings: true\n", 9,
       "tie_embeddings", ""},
      {"wrong type for a flag", kLlamaHead + kLlamaBody + "bias: sometimes\n", 8, "bias", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto root = parse(c.yaml);
    const auto e = expect_input_error([&] { pc::load_model_config(root); });
    EXPECT_EQ(e.where().file, "model.yaml");
    EXPECT_EQ(e.where().line, c.line) << e.what();
    EXPECT_EQ(e.key(), c.key) << e.what();
    if (!c.suggestion.empty()) {
      EXPECT_EQ(e.suggestion(), c.suggestion) << e.what();
    }
    EXPECT_FALSE(e.expected().empty());
  }
}
