#pragma once
// What the scenario says about training, against which a DeepSpeed config is resolved ("auto")
// and checked (values that contradict the scenario are input errors).
#include <cstdint>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

struct TrainingFacts {
  std::int64_t micro_batch = 1;  // per GPU
  std::int64_t grad_accum = 1;   // micro-batches per optimizer step
  DType dtype = DType::kBF16;    // training (parameter) dtype
  std::int64_t world_size = 1;   // data-parallel ranks
  std::int64_t hidden_size = 0;  // model hidden size h (HF "auto" heuristics use it)
};

}  // namespace prefetchlab::core
