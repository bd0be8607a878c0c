#pragma once
// The MLP activation a Hugging Face config names (transformers' ACT2FN: GPT-2's
// `activation_function`, BERT's and the decoders' `hidden_act`), priced by the kernels eager
// PyTorch runs for it. Most are one ATen kernel; GPT-2's default "gelu_new" is not: HF's
// NewGELUActivation computes 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) op by op,
// eight kernels forward and eleven backward, and autograd keeps four tensors of its width.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/input/yaml_section.hpp"
#include "core/model/module_costs.hpp"

namespace prefetchlab::core {

enum class ActivationFunction {
  kGelu,      // "gelu": GELUActivation, F.gelu (erf)
  kGeluTanh,  // "gelu_pytorch_tanh": F.gelu(approximate="tanh")
  kGeluNew,   // "gelu_new": NewGELUActivation, the tanh formula op by op
  kSilu,      // "silu", "swish": F.silu
  kRelu,      // "relu": F.relu
};

// The config's name for it ("gelu_new").
const char* activation_function_name(ActivationFunction activation);
// The function a config value names; false if this tool does not price it.
bool parse_activation_function(std::string_view name, ActivationFunction& out);
// The names parse_activation_function accepts, for error messages.
const std::vector<std::string>& activation_function_names();
// `key` of `section` read as an activation name, `fallback` when absent or null; a name this
// tool does not price is an InputError naming file, line, key and the accepted names.
ActivationFunction read_activation_function(const YamlSection& section, std::string_view key,
                                            ActivationFunction fallback);
// HF's module class for it (NewGELUActivation, SiLU, ...).
const char* activation_function_class(ActivationFunction activation);

// The activation over `elements` per token: its kernels forward and backward, and the bytes
// autograd keeps for backward (16-bit activations, as the builders count them: one saved tensor
// of the input for the one-kernel functions, four for gelu_new).
ModuleCosts activation_function_costs(ActivationFunction activation, std::int64_t elements,
                                      std::int64_t element_bytes);

}  // namespace prefetchlab::core
