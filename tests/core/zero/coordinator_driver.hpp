#pragma once
// A test executor for core::Coordinator: plays DeepSpeed's hooks over a ModelSpec's module tree
// in the order the simulator calls them (sim/ranks/rank_process.cpp; deepspeedai/DeepSpeed
// deepspeed/runtime/zero/parameter_offload.py) and logs every plan action with where it came from:
//   forward:  reset_step, then pre-order: fetch(m), children, release(m)
//   backward: fetch(m), children in reverse, release(m)
//   optimizer_step() when the test asks for it.
// The coordinator calls do not depend on where a module's own work runs, so the log is the
// simulator's. Used by coordinator_test.cpp (toy model) and coordinator_gpt2_test.cpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "core/zero/coordinator.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::testing {

namespace pc = prefetchlab::core;

enum class Source { kReset, kFetch, kRelease, kOptimizer };

struct Logged {
  int iteration = 0;
  Source source = Source::kFetch;
  pc::Phase phase = pc::Phase::kForward;
  int module = -1;
  pc::PlanAction action;
};

// Plays the executor: issues the hook calls of whole iterations and logs every action.
class Driver {
 public:
  Driver(pc::ModelSpec model, pc::CoordinatorConfig cfg)
      : model_(std::move(model)), coord_(model_, std::move(cfg)) {
    for (std::size_t m = 0; m < model_.modules.size(); ++m) {
      if (model_.modules[m].parent < 0) root_ = static_cast<int>(m);
    }
  }

  pc::Coordinator& coord() { return coord_; }

  // skip: modules whose whole subtree does not run (data-dependent control flow).
  void forward(const std::vector<int>& skip = {}) {
    ++iteration_;
    log(coord_.reset_step(), Source::kReset, pc::Phase::kForward, -1);
    visit(root_, pc::Phase::kForward, skip);
  }
  void backward(const std::vector<int>& skip = {}) { visit(root_, pc::Phase::kBackward, skip); }
  void iteration(const std::vector<int>& skip = {}) {
    forward(skip);
    backward(skip);
  }
  void optimizer_step() {
    log(coord_.optimizer_step(), Source::kOptimizer, pc::Phase::kForward, -1);
  }
  pc::FetchInfo fetch(int module, pc::Phase phase) {
    auto result = coord_.fetch_sub_module(module, phase);
    infos_.push_back({iteration_, result.info});
    log(result.plan, Source::kFetch, phase, module);
    return result.info;
  }
  void release(int module, pc::Phase phase) {
    log(coord_.release_sub_module(module, phase), Source::kRelease, phase, module);
  }

  const std::vector<Logged>& events() const { return events_; }

  std::vector<Logged> events_of(int iteration) const {
    std::vector<Logged> out;
    for (const auto& e : events_) {
      if (e.iteration == iteration) out.push_back(e);
    }
    return out;
  }

  std::vector<pc::Gather> gathers(int iteration, std::optional<pc::Phase> phase = std::nullopt,
                                  std::optional<pc::GatherKind> kind = std::nullopt) const {
    std::vector<pc::Gather> out;
    for (const auto& e : events_) {
      const auto* g = std::get_if<pc::Gather>(&e.action);
      if (g == nullptr || e.iteration != iteration) continue;
      if (phase && (e.source == Source::kReset || e.source == Source::kOptimizer ||
                    e.phase != *phase)) {
        continue;
      }
      if (kind && g->kind != *kind) continue;
      out.push_back(*g);
    }
    return out;
  }

  std::vector<int> released_params(int iteration, std::optional<pc::Phase> phase = std::nullopt,
                                   std::optional<Source> source = std::nullopt) const {
    std::vector<int> out;
    for (const auto& e : events_) {
      const auto* r = std::get_if<pc::Release>(&e.action);
      if (r == nullptr || e.iteration != iteration) continue;
      if (phase && e.phase != *phase) continue;
      if (source && e.source != *source) continue;
      out.insert(out.end(), r->param_ids.begin(), r->param_ids.end());
    }
    return out;
  }

  int count_prefetch_rounds(int iteration) const {
    int n = 0;
    for (const auto& e : events_) {
      if (e.iteration == iteration && std::holds_alternative<pc::PrefetchRound>(e.action)) ++n;
    }
    return n;
  }

  const pc::FetchInfo& info(int iteration, pc::Phase phase, int module) const {
    for (const auto& [it, info] : infos_) {
      if (it == iteration && info.phase == phase && info.module == module) return info;
    }
    throw std::out_of_range("no such fetch");
  }

 private:
  void visit(int module, pc::Phase phase, const std::vector<int>& skip) {
    if (std::find(skip.begin(), skip.end(), module) != skip.end()) return;
    fetch(module, phase);
    auto children = model_.modules[static_cast<std::size_t>(module)].children;
    if (phase == pc::Phase::kBackward) std::reverse(children.begin(), children.end());
    for (const int child : children) visit(child, phase, skip);
    // As the executors: no post-backward hook for a module fed only token ids.
    if (phase == pc::Phase::kBackward && !model_.modules[static_cast<std::size_t>(module)].post_backward_hook_fires) {
      return;
    }
    release(module, phase);
  }
  void log(const pc::Plan& plan, Source source, pc::Phase phase, int module) {
    for (const auto& action : plan.actions) {
      events_.push_back({iteration_, source, phase, module, action});
    }
  }

  pc::ModelSpec model_;
  pc::Coordinator coord_;
  int root_ = 0;
  int iteration_ = 0;
  std::vector<Logged> events_;
  std::vector<std::pair<int, pc::FetchInfo>> infos_;
};

// (count, numel) of a list of gathers.
inline std::pair<int, std::int64_t> totals(const std::vector<pc::Gather>& gathers) {
  std::int64_t numel = 0;
  for (const auto& g : gathers) numel += g.numel;
  return {static_cast<int>(gathers.size()), numel};
}

}  // namespace prefetchlab::testing
