#include "core/model/model_spec.hpp"

#include <stdexcept>

namespace prefetchlab::core {

std::int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2;
    case DType::kFP16: return 2;
    case DType::kFP32: return 4;
  }
  throw std::logic_error("dtype_bytes: unknown DType");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP32: return "fp32";
  }
  throw std::logic_error("dtype_name: unknown DType");
}

std::int64_t ModelSpec::total_numel() const {
  // The parameter table holds each unique nn.Parameter once, so tied weights count once.
  std::int64_t total = 0;
  for (const auto& param : params) total += param.numel;
  return total;
}

std::int64_t ModelSpec::direct_numel(int module_index) const {
  std::int64_t total = 0;
  for (const int id : modules.at(static_cast<std::size_t>(module_index)).param_ids) {
    total += params.at(static_cast<std::size_t>(id)).numel;
  }
  return total;
}

std::int64_t ModelSpec::forward_flops(std::int64_t micro_batch, std::int64_t seq_len) const {
  // Each module carries only its own work, so the sum over modules is the whole forward.
  std::int64_t total = 0;
  for (const auto& module : modules) total += module.forward_flops.at(micro_batch, seq_len);
  return total;
}

}  // namespace prefetchlab::core
