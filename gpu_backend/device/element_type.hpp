#pragma once
// Element types a Device computes and communicates in. bf16/fp16 are the training dtypes
// (core::DType); fp32 holds optimizer states; fp64 carries controller agreement values exactly.
#include <cstdint>
#include <stdexcept>

#include "core/model/model_spec.hpp"

namespace prefetchlab::gpu {

enum class ElementType { kBF16, kFP16, kFP32, kFP64 };

constexpr std::int64_t element_bytes(ElementType type) {
  switch (type) {
    case ElementType::kBF16:
    case ElementType::kFP16: return 2;
    case ElementType::kFP32: return 4;
    case ElementType::kFP64: return 8;
  }
  return 0;
}

constexpr const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::kBF16: return "bf16";
    case ElementType::kFP16: return "fp16";
    case ElementType::kFP32: return "fp32";
    case ElementType::kFP64: return "fp64";
  }
  return "?";
}

constexpr ElementType element_type_of(core::DType dtype) {
  switch (dtype) {
    case core::DType::kBF16: return ElementType::kBF16;
    case core::DType::kFP16: return ElementType::kFP16;
    case core::DType::kFP32: return ElementType::kFP32;
  }
  return ElementType::kFP32;
}

}  // namespace prefetchlab::gpu
