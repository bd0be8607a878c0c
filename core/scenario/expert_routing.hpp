#pragma once
// The scenario's MoE routing as the module tree sees it: per iteration (one micro-batch) and
// rank, how many tokens each expert module of each MoE block gets. An expert with 0 tokens does
// not run, as in transformers releases whose sparse MoE block calls only the experts the router
// hit (the `expert_hit` loop of recent modeling_mixtral.py; releases that call every expert,
// even on no tokens, fire every hook and never diverge). Its hooks and its parameters'
// all-gathers do not happen and the module order differs from DeepSpeed's recorded trace. Every draw comes from named streams of the scenario seed, so a run stays a
// pure function of (scenario, seed).
#include <cstdint>
#include <vector>

#include "core/moe/router.hpp"
#include "core/scenario/scenario.hpp"

namespace prefetchlab::core {

// One MoE block: its module and its experts' modules (index = expert id).
struct MoeLayer {
  int block = -1;
  std::vector<int> experts;
};

// The MoE blocks of `model`: modules with children named <block>.experts.0 .. <block>.experts.<E-1>.
std::vector<MoeLayer> moe_layers(const ModelSpec& model);

class ExpertRouting {
 public:
  explicit ExpertRouting(const Scenario& scenario);

  bool enabled() const { return !layers_.empty(); }
  const std::vector<MoeLayer>& layers() const { return layers_; }
  const RouterSpec& router() const { return router_; }
  // Tokens routed on `iteration` (1-based): micro_batch x that iteration's sequence length.
  std::int64_t tokens_of(std::int64_t iteration) const;

  // Per module of the model: the tokens its expert got on (iteration, rank), or -1 for modules
  // outside every expert's subtree. `module_tokens` is resized to the module count. Returns the
  // token-expert assignments dropped over capacity on all layers.
  std::int64_t route(std::int64_t iteration, int rank, std::vector<std::int64_t>& module_tokens) const;

 private:
  std::vector<MoeLayer> layers_;
  std::vector<std::vector<int>> popularity_;  // per layer: expert at each popularity rank
  std::vector<std::vector<int>> subtree_;     // per module: the modules of its subtree (experts only)
  RouterSpec router_;  // tokens: at the longest length; route() uses each iteration's own
  std::int64_t micro_batch_ = 0;
  std::vector<std::int64_t> seq_len_;  // per iteration (training.seq_len_distribution)
  std::uint64_t seed_ = 0;
  bool per_rank_ = false;
  std::size_t module_count_ = 0;
};

}  // namespace prefetchlab::core
