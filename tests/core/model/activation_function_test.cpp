// The MLP activation a config names, priced by what eager PyTorch runs for it, and read from
// both model file forms: HF config.json (activation_function, hidden_act, hidden_activation) and
// models/*.yaml (activation, dropout). Dropout probabilities of 0 call the module but run nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/model/activation_function.hpp"
#include "core/model/hf_config.hpp"
#include "core/model/model_config.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/input_error_testing.hpp"

namespace pc = prefetchlab::core;
namespace fs = std::filesystem;
using prefetchlab::testing::expect_input_error;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);

const pc::ModuleSpec& module(const pc::ModelSpec& spec, const std::string& name) {
  for (const auto& m : spec.modules) {
    if (m.name == name) return m;
  }
  throw std::runtime_error("no module " + name);
}

double forward_bytes_per_token(const pc::ModuleCosts& costs) {
  double bytes = 0;
  for (const auto& k : costs.kernels) bytes += static_cast<double>(k.bytes.per_token);
  return bytes;
}

double backward_bytes_per_token(const pc::ModuleCosts& costs) {
  double bytes = 0;
  for (const auto& k : costs.kernels) bytes += static_cast<double>(k.bytes.per_token) * k.backward_bytes_factor;
  return bytes;
}

int backward_kernels(const pc::ModuleCosts& costs) {
  int count = 0;
  for (const auto& k : costs.kernels) count += k.backward_kernels;
  return count;
}

// gpt2.json with `edits` replacing or adding top-level keys ("key": value lines).
fs::path gpt2_config(const TempDir& dir, const std::string& name, const std::vector<std::string>& lines) {
  std::string text = "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, "
                     "\"n_positions\": 128, \"vocab_size\": 1000";
  for (const auto& line : lines) text += ", " + line;
  text += "}";
  const fs::path file = dir.path() / (name + ".json");
  std::ofstream(file) << text;
  return file;
}

// The action's InputError names the file, the key and, in its expected form, `expected`.
template <class F>
void expect_key_error(F action, const std::string& file_name, const std::string& key, const std::string& expected = "") {
  const pc::InputError e = expect_input_error(action);
  EXPECT_NE(e.where().file.find(file_name), std::string::npos) << e.what();
  EXPECT_EQ(e.key(), key) << e.what();
  EXPECT_NE(e.expected().find(expected), std::string::npos) << e.what();
}

}  // namespace

TEST(ActivationFunction, GeluNewIsEightKernelsForwardElevenBackwardAndKeepsFourTensors) {
  const std::int64_t n = 1000;
  const std::int64_t e = 2;
  const pc::ModuleCosts fused = pc::activation_function_costs(pc::ActivationFunction::kGeluTanh, n, e);
  ASSERT_EQ(fused.kernels.size(), 1u);
  EXPECT_EQ(forward_bytes_per_token(fused), 2.0 * e * n);  // read x, write y
  EXPECT_EQ(fused.activation_bytes.per_token, 2 * n);     // x

  // 0.5 * x * (1 + tanh(c * (x + 0.044715 * x^3))): pow, mul, add, mul, tanh, add, mul, mul.
  const pc::ModuleCosts gelu_new = pc::activation_function_costs(pc::ActivationFunction::kGeluNew, n, e);
  EXPECT_EQ(gelu_new.kernels.size(), 8u);
  EXPECT_EQ(forward_bytes_per_token(gelu_new), 18.0 * e * n);
  EXPECT_EQ(backward_kernels(gelu_new), 11);
  EXPECT_EQ(backward_bytes_per_token(gelu_new), 28.0 * e * n);
  EXPECT_EQ(gelu_new.activation_bytes.per_token, 4 * 2 * n);  // x, tanh's output, both factors
}

TEST(ActivationFunction, NamesRoundTripAndUnknownOnesAreRefused) {
  for (const auto& name : pc::activation_function_names()) {
    pc::ActivationFunction f{};
    ASSERT_TRUE(pc::parse_activation_function(name, f)) << name;
    if (name != "swish") {
      EXPECT_EQ(pc::activation_function_name(f), name);
    }
  }
  pc::ActivationFunction f{};
  EXPECT_FALSE(pc::parse_activation_function("gelu_10", f));
}

TEST(ActivationFunction, Gpt2ConfigReadsItsActivationAndDropouts) {
  TempDir dir("activation-gpt2");
  // GPT2Config's defaults: gelu_new, dropouts 0.1.
  const pc::ModelSpec plain = pc::load_hf_config(gpt2_config(dir, "plain", {}), pc::DType::kBF16);
  EXPECT_EQ(module(plain, "transformer.h.0.mlp.act").class_name, "NewGELUActivation");
  EXPECT_EQ(module(plain, "transformer.h.0.mlp.act").kernels.size(), 8u);
  EXPECT_EQ(module(plain, "transformer.h.0.mlp.dropout").kernels.size(), 1u);
  EXPECT_EQ(module(plain, "transformer.drop").kernels.size(), 1u);

  const pc::ModelSpec fused = pc::load_hf_config(
      gpt2_config(dir, "fused",
                  {"\"activation_function\": \"gelu_pytorch_tanh\"", "\"resid_pdrop\": 0.0", "\"embd_pdrop\": 0.0",
                   "\"attn_pdrop\": 0.0"}),
      pc::DType::kBF16, pc::AttentionImpl::kEager);
  EXPECT_EQ(module(fused, "transformer.h.0.mlp.act").class_name, "PytorchGELUTanh");
  EXPECT_EQ(module(fused, "transformer.h.0.mlp.act").kernels.size(), 1u);
  // p = 0: the module is still called (its hooks fire) but runs and keeps nothing.
  for (const std::string name : {"transformer.drop", "transformer.h.0.mlp.dropout", "transformer.h.0.attn.resid_dropout",
                                 "transformer.h.0.attn.attn_dropout"}) {
    EXPECT_TRUE(module(fused, name).kernels.empty()) << name;
    EXPECT_EQ(module(fused, name).activation_bytes.per_token, 0) << name;
    EXPECT_EQ(module(fused, name).activation_bytes.per_token_per_position, 0) << name;
  }

  expect_key_error([&] { pc::load_hf_config(gpt2_config(dir, "bad", {"\"activation_function\": \"gelu_10\""}), pc::DType::kBF16); },
                     "bad.json", "activation_function", "gelu_new");
  expect_key_error([&] { pc::load_hf_config(gpt2_config(dir, "p1", {"\"resid_pdrop\": 1.5"}), pc::DType::kBF16); },
                     "p1.json", "resid_pdrop");
}

TEST(ActivationFunction, DecodersReadTheirFamilysKeyAndNoteTheOther) {
  TempDir dir("activation-decoders");
  auto write = [&](const std::string& name, const std::string& type, const std::string& extra) {
    const fs::path file = dir.path() / (name + ".json");
    std::ofstream(file) << "{\"model_type\": \"" << type
                        << "\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"intermediate_size\": 128, \"vocab_size\": 1000, \"max_position_embeddings\": 128"
                        << extra << "}";
    return file;
  };
  const pc::ModelSpec llama = pc::load_hf_config(write("llama", "llama", ""), pc::DType::kBF16);
  EXPECT_EQ(module(llama, "model.layers.0.mlp.act_fn").class_name, "SiLU");
  const pc::ModelSpec gelu_new = pc::load_hf_config(write("llama-gelu-new", "llama", ", \"hidden_act\": \"gelu_new\""), pc::DType::kBF16);
  EXPECT_EQ(module(gelu_new, "model.layers.0.mlp.act_fn").class_name, "NewGELUActivation");
  EXPECT_EQ(module(gelu_new, "model.layers.0.mlp.act_fn").kernels.size(), 8u);

  // GemmaMLP applies hidden_activation; its hidden_act is read and noted as without effect.
  std::vector<std::string> notes;
  const pc::ModelSpec gemma = pc::load_hf_config(write("gemma", "gemma", ", \"hidden_act\": \"silu\", \"head_dim\": 16"),
                                                 pc::DType::kBF16, pc::AttentionImpl::kSdpa, &notes);
  EXPECT_EQ(module(gemma, "model.layers.0.mlp.act_fn").class_name, "PytorchGELUTanh");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("hidden_act"), std::string::npos) << notes[0];

  // Eager attention with attention_dropout > 0 drops the probabilities out; sdpa fuses it.
  const pc::ModelSpec dropped = pc::load_hf_config(write("llama-dropout", "llama", ", \"attention_dropout\": 0.1"),
                                                   pc::DType::kBF16, pc::AttentionImpl::kEager);
  EXPECT_EQ(module(dropped, "model.layers.0.self_attn").kernels.size(),
            module(pc::load_hf_config(write("llama-eager", "llama", ""), pc::DType::kBF16, pc::AttentionImpl::kEager),
                   "model.layers.0.self_attn")
                    .kernels.size() +
                1);
}

TEST(ActivationFunction, ModelFilesTakeActivationAndDropout) {
  TempDir dir("activation-yaml");
  auto write = [&](const std::string& name, const std::string& text) {
    const fs::path file = dir.path() / (name + ".yaml");
    std::ofstream(file) << text;
    return file;
  };
  const std::string gpt2 = "architecture: gpt2\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\nvocab_size: 1000\nmax_positions: 128\n";
  const pc::ModelSpec plain = pc::load_model_file(write("plain", gpt2), pc::DType::kBF16);
  EXPECT_EQ(module(plain, "transformer.h.0.mlp.act").class_name, "NewGELUActivation");
  const pc::ModelSpec fused = pc::load_model_file(write("fused", gpt2 + "activation: gelu\ndropout: 0\n"), pc::DType::kBF16);
  EXPECT_EQ(module(fused, "transformer.h.0.mlp.act").class_name, "GELUActivation");
  EXPECT_TRUE(module(fused, "transformer.h.0.mlp.dropout").kernels.empty());

  const std::string llama =
      "architecture: llama\nhidden_size: 64\nnum_layers: 2\nnum_heads: 4\nvocab_size: 1000\nmax_positions: 128\n"
      "intermediate_size: 128\n";
  expect_key_error([&] { pc::load_model_file(write("llama-dropout", llama + "dropout: 0.1\n"), pc::DType::kBF16); },
                     "llama-dropout.yaml", "dropout");
  expect_key_error([&] { pc::load_model_file(write("bad", gpt2 + "activation: mish\n"), pc::DType::kBF16); },
                     "bad.yaml", "activation", "gelu_new");
}
