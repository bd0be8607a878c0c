#include "core/moe/moe_config.hpp"

namespace prefetchlab::core {

const char* moe_routing_name(MoeRouting routing) {
  return routing == MoeRouting::kZipf ? "zipf" : "uniform";
}

const char* moe_rank_routing_name(MoeRankRouting ranks) {
  return ranks == MoeRankRouting::kOwn ? "own" : "same";
}

MoeConfig load_moe_config(const YamlSection& section, bool present, const ModelSpec& model) {
  MoeConfig config;
  if (!present) return config;
  section.allow_only({"routing", "zipf_exponent", "capacity_factor", "ranks"});
  if (model.num_experts <= 0 || model.experts_per_token <= 0) {
    throw InputError(section.location(), section.path(),
                     "is set but model '" + model.name + "' has no mixture-of-experts layers",
                     "a MoE model (e.g. a Mixtral or Qwen2-MoE config.json), or no moe section");
  }
  config.enabled = true;
  config.routing = section.require_enum<MoeRouting>("routing", {{"uniform", MoeRouting::kUniform},
                                                                {"zipf", MoeRouting::kZipf}});
  if (config.routing == MoeRouting::kZipf) {
    if (!section.has("zipf_exponent")) {
      section.fail("zipf_exponent", "is missing for routing: zipf", "an exponent > 0, e.g. 1.2");
    }
    config.zipf_exponent = section.require_double("zipf_exponent", 0, 100);
    if (!(config.zipf_exponent > 0)) {
      section.fail("zipf_exponent", "is 0", "an exponent > 0, e.g. 1.2 (uniform routing: routing: uniform)");
    }
  } else if (section.has("zipf_exponent")) {
    section.fail("zipf_exponent", "is set but routing is uniform", "routing: zipf, or no zipf_exponent");
  }
  if (section.has("capacity_factor")) {
    config.capacity_factor = section.require_double("capacity_factor", 0, 1e6);
    if (!(config.capacity_factor > 0)) {
      section.fail("capacity_factor", "is 0", "a factor > 0, e.g. 1.25, or no key for no capacity limit");
    }
  }
  config.ranks = section.get_enum<MoeRankRouting>("ranks", MoeRankRouting::kSame,
                                                  {{"same", MoeRankRouting::kSame}, {"own", MoeRankRouting::kOwn}});
  section.finish();
  return config;
}

}  // namespace prefetchlab::core
