#include "core/scenario/expert_routing.hpp"

#include <string>

#include "core/scenario/random_stream.hpp"

namespace prefetchlab::core {
namespace {

void add_subtree(const ModelSpec& model, int module, std::vector<int>& out) {
  out.push_back(module);
  for (const int child : model.modules[static_cast<std::size_t>(module)].children) add_subtree(model, child, out);
}

}  // namespace

std::vector<MoeLayer> moe_layers(const ModelSpec& model) {
  std::vector<MoeLayer> layers;
  if (model.num_experts <= 0) return layers;
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    const auto& spec = model.modules[m];
    MoeLayer layer;
    layer.block = static_cast<int>(m);
    layer.experts.assign(static_cast<std::size_t>(model.num_experts), -1);
    const std::string prefix = spec.name + ".experts.";
    for (const int child : spec.children) {
      const std::string& name = model.modules[static_cast<std::size_t>(child)].name;
      if (!name.starts_with(prefix)) continue;
      const std::string id = name.substr(prefix.size());
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto x = std::stoll(id);
      if (x < model.num_experts) layer.experts[static_cast<std::size_t>(x)] = child;
    }
    bool complete = true;
    for (const int e : layer.experts) complete = complete && e >= 0;
    if (complete) layers.push_back(std::move(layer));
  }
  return layers;
}

ExpertRouting::ExpertRouting(const Scenario& scenario) {
  if (!scenario.moe.enabled) return;
  const ModelSpec& model = scenario.model;
  layers_ = moe_layers(model);
  module_count_ = model.modules.size();
  router_.tokens = scenario.training.micro_batch * scenario.training.seq_len;
  micro_batch_ = scenario.training.micro_batch;
  seq_len_ = scenario.training.seq_len_distribution.draw(scenario.noise.seed, scenario.training.iterations);
  router_.experts = model.num_experts;
  router_.top_k = model.experts_per_token;
  router_.routing = scenario.moe.routing;
  router_.zipf_exponent = scenario.moe.zipf_exponent;
  router_.capacity_factor = scenario.moe.capacity_factor;
  seed_ = scenario.noise.seed;
  per_rank_ = scenario.moe.ranks == MoeRankRouting::kOwn;
  // Each layer's router prefers its own experts: a seeded shuffle per layer, fixed for the run.
  RandomStream stream(seed_, "moe/popularity");
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    std::vector<int> order(static_cast<std::size_t>(router_.experts));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    for (std::size_t i = order.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(stream.next_u64() % i);
      std::swap(order[i - 1], order[j]);
    }
    popularity_.push_back(std::move(order));
  }
  subtree_.resize(module_count_);
  for (const auto& layer : layers_) {
    for (const int expert : layer.experts) add_subtree(model, expert, subtree_[static_cast<std::size_t>(expert)]);
  }
}

std::int64_t ExpertRouting::tokens_of(std::int64_t iteration) const {
  const auto i = static_cast<std::size_t>(iteration - 1);
  return iteration >= 1 && i < seq_len_.size() ? micro_batch_ * seq_len_[i] : router_.tokens;
}

std::int64_t ExpertRouting::route(std::int64_t iteration, int rank, std::vector<std::int64_t>& module_tokens) const {
  module_tokens.assign(module_count_, -1);
  if (!enabled()) return 0;
  // kSame: one stream per iteration, so every rank draws the same routing.
  std::string name = "moe/iteration" + std::to_string(iteration);
  if (per_rank_) name += "/rank" + std::to_string(rank);
  RandomStream stream(seed_, name);
  const std::function<double()> uniform = [&stream] { return stream.uniform(); };
  RouterSpec router = router_;
  router.tokens = tokens_of(iteration);
  std::int64_t dropped = 0;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const ExpertLoad load = route_micro_batch(router, popularity_[l], uniform);
    dropped += load.dropped_tokens;
    for (std::size_t x = 0; x < load.tokens.size(); ++x) {
      for (const int m : subtree_[static_cast<std::size_t>(layers_[l].experts[x])]) {
        module_tokens[static_cast<std::size_t>(m)] = load.tokens[x];
      }
    }
  }
  return dropped;
}

}  // namespace prefetchlab::core
