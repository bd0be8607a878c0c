#pragma once
// A MoE router's load for one micro-batch on one layer: how many tokens each expert gets.
// Each token picks top_k distinct experts, drawn one after the other in proportion to the
// experts' popularity weights (uniform: all 1; zipf: the expert at popularity rank r, 1-based,
// weighs r^-s). With a capacity factor c, an expert keeps at most
// ceil(c * tokens * top_k / experts) tokens and the rest are dropped (GShard, Lepikhin et al.
// 2020, arXiv:2006.16668; DeepSpeed's deepspeed/moe/sharded_moe.py _capacity). HF's Mixtral
// has no capacity limit (capacity factor 0 here).
#include <cstdint>
#include <functional>
#include <vector>

#include "core/moe/moe_config.hpp"

namespace prefetchlab::core {

struct RouterSpec {
  std::int64_t tokens = 0;   // micro_batch x seq_len
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  MoeRouting routing = MoeRouting::kUniform;
  double zipf_exponent = 0;
  double capacity_factor = 0;  // 0 = no limit
};

struct ExpertLoad {
  std::vector<std::int64_t> tokens;  // per expert (index = expert id), after the capacity drop
  std::int64_t dropped_tokens = 0;   // token-expert assignments over capacity
};

// ceil(capacity_factor * tokens * top_k / experts); 0 when capacity_factor is 0 (no limit).
std::int64_t expert_capacity_tokens(const RouterSpec& spec);

// Routes one micro-batch. `popularity[r]` is the expert at popularity rank r (a permutation of
// 0..experts-1; a layer's router prefers its own experts). `uniform` returns draws in [0, 1).
// Throws std::invalid_argument on a bad spec (top_k outside 1..experts, negative tokens).
ExpertLoad route_micro_batch(const RouterSpec& spec, const std::vector<int>& popularity,
                             const std::function<double()>& uniform);

}  // namespace prefetchlab::core
