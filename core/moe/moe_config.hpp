#pragma once
// The scenario's `moe:` section: how the router of a mixture-of-experts model (Mixtral,
// Qwen2-MoE) spreads each micro-batch's tokens over its experts. top_k and the expert count
// come from the model (config.json's num_experts_per_tok, num_local_experts / num_experts).
//
//   moe:
//     routing: zipf          # uniform | zipf: expert popularity ~ rank^-zipf_exponent
//     zipf_exponent: 2.5     # > 0, zipf only
//     capacity_factor: 1.25  # > 0: tokens over ceil(factor * tokens * top_k / experts) dropped;
//                            # omitted: no capacity limit (HF Mixtral is dropless)
//     ranks: same            # same | own: every rank routes alike, or each its own micro-batch
#include <cstdint>

#include "core/input/yaml_section.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

enum class MoeRouting { kUniform, kZipf };
// kSame: all ranks draw one routing per iteration (the trace-invalidation cost alone);
// kOwn: each rank routes its own data, as real data-parallel ranks do — without ZeRO-3 leaf
// modules their experts then differ and so do their all-gathers (DeepSpeed issue #4808: hang).
enum class MoeRankRouting { kSame, kOwn };

struct MoeConfig {
  bool enabled = false;  // a `moe:` section was given
  MoeRouting routing = MoeRouting::kUniform;
  double zipf_exponent = 0;
  double capacity_factor = 0;  // 0 = no capacity limit
  MoeRankRouting ranks = MoeRankRouting::kSame;
};

const char* moe_routing_name(MoeRouting routing);
const char* moe_rank_routing_name(MoeRankRouting ranks);

// Reads `moe:` (absent or null: disabled). Fails (InputError with file, line, key) when the
// model has no experts, on unknown keys and on out-of-range values.
MoeConfig load_moe_config(const YamlSection& section, bool present, const ModelSpec& model);

}  // namespace prefetchlab::core
