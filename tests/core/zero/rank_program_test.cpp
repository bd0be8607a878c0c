// core::RankProgram: DeepSpeed's per-rank host program, step by step, on a toy model whose every
// expected step is derived in the comments (hook order: parameter_offload.py; gradient hooks and
// the IPG bucket: stage3.py; checkpointing: torch.utils.checkpoint).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/zero/rank_program.hpp"

namespace pc = prefetchlab::core;

namespace {

int add_module(pc::ModelSpec& model, const char* name, const char* cls, int parent, std::vector<int> params) {
  pc::ModuleSpec module;
  module.name = name;
  module.class_name = cls;
  module.parent = parent;
  module.depth = parent < 0 ? 0 : model.modules[static_cast<std::size_t>(parent)].depth + 1;
  module.param_ids = std::move(params);
  model.modules.push_back(std::move(module));
  const int index = static_cast<int>(model.modules.size()) - 1;
  if (parent >= 0) model.modules[static_cast<std::size_t>(parent)].children.push_back(index);
  return index;
}

// 0 root; 1 embed (p0, 1000, tied with 3 lm_head); 2 layer (p1 100, p2 10); 3 lm_head (p0).
pc::ModelSpec toy_model() {
  pc::ModelSpec model;
  model.name = "toy";
  model.params.push_back({"wte.weight", 1000, pc::DType::kBF16, 0, 0});
  model.params.push_back({"layer.weight", 100, pc::DType::kBF16, 10, 10});
  model.params.push_back({"layer.bias", 10, pc::DType::kBF16, 0, 0});
  add_module(model, "", "Root", -1, {});
  add_module(model, "embed", "Embedding", 0, {0});
  add_module(model, "layer", "Layer", 0, {1, 2});
  add_module(model, "lm_head", "Linear", 0, {0});
  return model;
}

std::vector<std::string> steps_of(pc::RankProgram& program, std::int32_t iteration, const std::vector<char>& skipped = {}) {
  std::vector<std::string> out;
  for (const pc::ProgramStep& step : program.iteration(iteration, skipped)) {
    out.push_back(pc::describe(step, program.flush_params(step)));
  }
  return out;
}

TEST(RankProgram, HooksFireInDeepSpeedsOrderAndTheBucketFlushesOnOverflow) {
  const pc::ModelSpec model = toy_model();
  // A bucket of 1050 elements: p0 (1000) fits alone; p1 (100) would overflow it.
  pc::RankProgram program(model, {}, 1050, 1);
  const std::vector<std::string> expected{
      "reset_step",
      // Forward: pre-hook, children, own work, what it keeps, post-hook; pre-order.
      "fetch forward module 0",
      "fetch forward module 1", "work forward module 1", "keep all module 1", "release forward module 1",
      "fetch forward module 2", "work forward module 2", "keep all module 2", "release forward module 2",
      "fetch forward module 3", "work forward module 3", "keep all module 3", "release forward module 3",
      "work forward module 0", "keep all module 0", "release forward module 0",
      "forward end",
      // Backward: the root's hooks, then children in reverse (autograd order). lm_head's use of
      // the tied p0 is not its last; embed's is.
      "fetch backward module 0", "work backward module 0", "drop activations module 0",
      "fetch backward module 3", "work backward module 3", "drop activations module 3",
      "release backward module 3",
      "fetch backward module 2", "work backward module 2", "drop activations module 2",
      "reduce waits for compute module 2",
      "gradient module 2 param 1 at 0 (100)", "gradient module 2 param 2 at 100 (10)",
      "release backward module 2",
      "fetch backward module 1", "work backward module 1", "drop activations module 1",
      // p0 would overflow the bucket (110 + 1000 > 1050): the bucket goes first, and the reduce
      // stream waits for compute again after the flush.
      "flush module 1 params 1 2 (110)", "reduce waits for compute module 1",
      "gradient module 1 param 0 at 0 (1000)",
      "release backward module 1",
      "release backward module 0",
      "backward compute end",
      "flush module 0 params 0 (1000)",
      "end of backward",
      "optimizer step",
      "iteration end"};
  EXPECT_EQ(steps_of(program, 1), expected);
  // The next iteration starts over: every parameter's uses again, an empty bucket.
  EXPECT_EQ(steps_of(program, 2), expected);
}

TEST(RankProgram, TheOptimizerStepsOnlyAtAnAccumulationBoundary) {
  const pc::ModelSpec model = toy_model();
  pc::RankProgram program(model, {}, 1 << 20, 3);
  for (std::int32_t i = 1; i <= 6; ++i) {
    const std::vector<std::string> steps = steps_of(program, i);
    const bool stepped = std::find(steps.begin(), steps.end(), "optimizer step") != steps.end();
    EXPECT_EQ(stepped, i % 3 == 0) << "iteration " << i;
    EXPECT_EQ(program.optimizer_step(i), i % 3 == 0);
  }
}

TEST(RankProgram, ACheckpointUnitKeepsItsInputAndRunsItsForwardAgainBeforeItsBackward) {
  pc::ModelSpec model = toy_model();
  // layer (2) as a unit with a child inside it.
  const int inner = add_module(model, "layer.act", "Act", 2, {});
  pc::CheckpointUnits units;
  units.unit.assign(model.modules.size(), false);
  units.inside.assign(model.modules.size(), false);
  units.unit[2] = true;
  units.inside[2] = units.inside[static_cast<std::size_t>(inner)] = true;
  pc::RankProgram program(model, units, 1 << 20, 1);
  const std::vector<std::string> steps = steps_of(program, 1);
  const auto at = [&](const std::string& s) {
    const auto it = std::find(steps.begin(), steps.end(), s);
    EXPECT_NE(it, steps.end()) << s;
    return it - steps.begin();
  };
  // First forward: the unit keeps its input, the module inside it keeps nothing.
  EXPECT_GE(at("keep checkpoint input module 2"), 0);
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "keep all module 4"), 0);
  // Backward: the input goes, the unit's forward runs again (hooks and all) keeping everything,
  // then the unit's backward fetch.
  const auto drop = at("drop checkpoint input module 2");
  const auto refetch = at("fetch forward module 2 (recompute)");
  const auto inner_keep = at("keep all module 4 (recompute)");
  const auto rerelease = at("release forward module 2 (recompute)");
  const auto backward_fetch = at("fetch backward module 2");
  EXPECT_LT(drop, refetch);
  EXPECT_LT(refetch, inner_keep);
  EXPECT_LT(inner_keep, rerelease);
  EXPECT_LT(rerelease, backward_fetch);
}

TEST(RankProgram, ASkippedModuleFiresNoHookAndATiedGradientItSkipsNeverCompletes) {
  const pc::ModelSpec model = toy_model();
  pc::RankProgram program(model, {}, 1 << 20, 1);
  std::vector<char> skipped(model.modules.size(), 0);
  skipped[3] = 1;  // lm_head
  const std::vector<std::string> steps = steps_of(program, 1, skipped);
  for (const std::string& step : steps) EXPECT_EQ(step.find("module 3"), std::string::npos) << step;
  // p0's other use (lm_head) never ran: its gradient is not final in this iteration.
  EXPECT_EQ(std::count_if(steps.begin(), steps.end(),
                          [](const std::string& s) { return s.find("param 0 ") != std::string::npos; }),
            0);
  EXPECT_EQ(steps.back(), "iteration end");
  // The flag is per iteration: without it, lm_head runs again.
  const std::vector<std::string> next = steps_of(program, 2);
  EXPECT_NE(std::find(next.begin(), next.end(), "fetch forward module 3"), next.end());
}

TEST(RankProgram, ALeafReducesItsSubtreesGradientsAfterItsChildrenAndHooksStopBelowIt) {
  pc::ModelSpec model = toy_model();
  const int expert = add_module(model, "layer.expert", "Expert", 2, {});
  model.params.push_back({"layer.expert.weight", 50, pc::DType::kBF16, 5, 10});
  model.modules[static_cast<std::size_t>(expert)].param_ids = {3};
  model.modules[2].z3_leaf = true;
  model.modules[2].param_ids = {1, 2, 3};  // a leaf's hooks cover its subtree's parameters
  model.modules[static_cast<std::size_t>(expert)].z3_hooks = false;
  pc::RankProgram program(model, {}, 1 << 20, 1);
  const std::vector<std::string> steps = steps_of(program, 1);
  EXPECT_EQ(std::count_if(steps.begin(), steps.end(),
                          [](const std::string& s) {
                            return (s.rfind("fetch", 0) == 0 || s.rfind("release", 0) == 0) &&
                                   s.find("module 4") != std::string::npos;
                          }),
            0);
  const auto child_work = std::find(steps.begin(), steps.end(), "work backward module 4");
  const auto gradient = std::find(steps.begin(), steps.end(), "gradient module 2 param 3 at 110 (50)");
  ASSERT_NE(child_work, steps.end());
  ASSERT_NE(gradient, steps.end());
  EXPECT_LT(child_work, gradient);
}

}  // namespace
