#include "core/model/activation_function.hpp"

#include <array>
#include <stdexcept>
#include <utility>

namespace prefetchlab::core {
namespace {

struct Named {
  std::string_view name;
  ActivationFunction function;
};
// transformers/activations.py ACT2CLS; "swish" is SiLU's other name there.
constexpr std::array<Named, 6> kNames{{{"gelu", ActivationFunction::kGelu},
                                       {"gelu_pytorch_tanh", ActivationFunction::kGeluTanh},
                                       {"gelu_new", ActivationFunction::kGeluNew},
                                       {"silu", ActivationFunction::kSilu},
                                       {"swish", ActivationFunction::kSilu},
                                       {"relu", ActivationFunction::kRelu}}};

// One elementwise kernel of gelu_new: bytes and FLOPs per element forward, and its part of the
// backward (kernels and bytes per element).
KernelSpec elementwise(std::string op, std::int64_t elements, std::int64_t forward_bytes, std::int64_t flops,
                       int backward_kernels, std::int64_t backward_bytes) {
  return memory_kernel(std::move(op), elements, forward_bytes, flops, backward_kernels,
                       static_cast<double>(backward_bytes) / static_cast<double>(forward_bytes));
}

}  // namespace

const char* activation_function_name(ActivationFunction activation) {
  switch (activation) {
    case ActivationFunction::kGelu: return "gelu";
    case ActivationFunction::kGeluTanh: return "gelu_pytorch_tanh";
    case ActivationFunction::kGeluNew: return "gelu_new";
    case ActivationFunction::kSilu: return "silu";
    case ActivationFunction::kRelu: return "relu";
  }
  throw std::logic_error("activation_function_name: unknown ActivationFunction");
}

bool parse_activation_function(std::string_view name, ActivationFunction& out) {
  for (const Named& named : kNames) {
    if (named.name == name) {
      out = named.function;
      return true;
    }
  }
  return false;
}

const std::vector<std::string>& activation_function_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Named& named : kNames) out.emplace_back(named.name);
    return out;
  }();
  return names;
}

ActivationFunction read_activation_function(const YamlSection& section, std::string_view key,
                                            ActivationFunction fallback) {
  section.mark_known(key);
  if (!section.has(key) || section.raw(key).IsNull()) return fallback;
  const std::string name = section.require_string(key);
  ActivationFunction out = fallback;
  if (!parse_activation_function(name, out)) {
    std::string names;
    for (const std::string& n : activation_function_names()) names += (names.empty() ? "" : ", ") + n;
    section.fail(key, "is '" + name + "', an activation this tool does not price", "one of " + names);
  }
  return out;
}

const char* activation_function_class(ActivationFunction activation) {
  switch (activation) {
    case ActivationFunction::kGelu: return "GELUActivation";
    case ActivationFunction::kGeluTanh: return "PytorchGELUTanh";
    case ActivationFunction::kGeluNew: return "NewGELUActivation";
    case ActivationFunction::kSilu: return "SiLU";
    case ActivationFunction::kRelu: return "ReLU";
  }
  throw std::logic_error("activation_function_class: unknown ActivationFunction");
}

ModuleCosts activation_function_costs(ActivationFunction activation, std::int64_t elements,
                                      std::int64_t element_bytes) {
  const std::int64_t n = elements;
  switch (activation) {
    case ActivationFunction::kGelu: return activation_costs("gelu", n, 8, element_bytes).saving(2 * n);
    case ActivationFunction::kGeluTanh: return activation_costs("gelu_tanh", n, 8, element_bytes).saving(2 * n);
    case ActivationFunction::kSilu: return activation_costs("silu", n, 4, element_bytes).saving(2 * n);
    case ActivationFunction::kRelu: return activation_costs("relu", n, 1, element_bytes).saving(2 * n);
    case ActivationFunction::kGeluNew: break;
  }
  // NewGELUActivation.forward: 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * torch.pow(x, 3.0)))),
  // each op its own kernel over the full width (t1..t7 the temporaries). Backward, autograd's
  // nodes in reverse: the product's two gradients (two products), tanh_backward, the two scalar
  // products, pow's 3 * x^2 * grad (pow, two products), the 0.5 product, and the two adds that
  // sum x's three gradients; the adds of a constant pass the gradient through. Saved: x (pow),
  // tanh's output (tanh), and both factors of the final product.
  const std::int64_t e = element_bytes;
  ModuleCosts c;
  c.kernels = {elementwise("gelu_new.pow", n, 2 * e, 2, 3, 7 * e),
               elementwise("gelu_new.mul_0.044715", n, 2 * e, 1, 1, 2 * e),
               elementwise("gelu_new.add_x", n, 3 * e, 1, 2, 6 * e),
               elementwise("gelu_new.mul_sqrt_2_over_pi", n, 2 * e, 1, 1, 2 * e),
               elementwise("gelu_new.tanh", n, 2 * e, 4, 1, 3 * e),
               elementwise("gelu_new.add_1", n, 2 * e, 1, 0, 0),
               elementwise("gelu_new.mul_0.5_x", n, 2 * e, 1, 1, 2 * e),
               elementwise("gelu_new.mul", n, 3 * e, 1, 2, 6 * e)};
  return c.saving(4 * 2 * n);
}

}  // namespace prefetchlab::core
