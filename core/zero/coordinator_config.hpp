#pragma once
// What core::Coordinator needs to know of a ZeRO-3 configuration. Deliberately not a YAML or
// JSON type: the scenario / ds_config loaders fill it (keys and defaults:
// deepspeed/runtime/zero/config.py).
#include <cstdint>
#include <vector>

namespace prefetchlab::core {

struct CoordinatorConfig {
  // stage3_prefetch_bucket_size: numel issued per prefetch round (a per-fetch quantum). 0 turns
  // prefetching off. An adaptive controller may change it between iterations
  // (Coordinator::set_prefetch_bucket_numel).
  std::int64_t prefetch_bucket_numel = 50'000'000;
  // stage3_max_live_parameters: bounds prefetch issuance only (budget = max_live - n_available).
  std::int64_t max_live_numel = 1'000'000'000;
  // stage3_max_reuse_distance: numel of upcoming trace scanned before releasing a parameter.
  std::int64_t max_reuse_distance_numel = 1'000'000'000;
  // ds_persist per parameter (index = ds_id), from the persistence rules
  // (stage3_param_persistence_threshold / stage3_model_persistence_threshold). Empty = none.
  std::vector<bool> persistent;
  // Data-parallel partition group size W: each parameter is padded to a multiple of W
  // (partition_numel = ceil(numel / W)); W == 1 means no collective is launched at all.
  int world_size = 1;
  // stage3_allgather_sequential: one all-gather (and one handle) per parameter, no coalescing.
  // DeepSpeed's engine then forces the prefetch bucket to 1; the Coordinator does the same at
  // construction so every caller gets it.
  bool allgather_sequential = false;
};

}  // namespace prefetchlab::core
