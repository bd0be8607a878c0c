#pragma once
// ZeRO-3's resident model states on one rank (Rajbhandari et al. 2020; DeepSpeed's stage3.py):
// the 16-bit parameter shards, the fp32 master weights and Adam moments, the flat gradient
// partition and the contiguous IPG reduce bucket, one flat tensor each, in the order DeepSpeed
// allocates them. Offloaded states live in host memory instead and are not listed. The simulator
// and the real backend allocate exactly these, in this order.
#include <cstdint>
#include <vector>

#include "core/model/model_spec.hpp"
#include "core/zero/zero_config.hpp"

namespace prefetchlab::core {

enum class ModelState { kParameterShards, kMasterWeights, kExpAvg, kExpAvgSq, kGradientPartition, kIpgBucket };

struct ModelStateBuffer {
  ModelState state = ModelState::kParameterShards;
  const char* what = "";  // as an out-of-memory message names it
  std::int64_t bytes = 0;
};

// Elements of one rank's flat partition: each parameter's ceil(numel / world_size).
std::int64_t partition_numel(const ModelSpec& model, std::int64_t world_size);

// The device's model states, in allocation order; none is empty. `element_bytes`: the 16-bit
// (training dtype) element.
std::vector<ModelStateBuffer> device_model_states(const ZeroConfig& zero, std::int64_t partition_numel,
                                                  std::int64_t element_bytes);

}  // namespace prefetchlab::core
