#include "core/zero/rank_program.hpp"

#include <sstream>
#include <utility>

namespace prefetchlab::core {
namespace {

const char* name_of(StepKind kind) {
  switch (kind) {
    case StepKind::kResetStep: return "reset_step";
    case StepKind::kFetch: return "fetch";
    case StepKind::kOwnWork: return "work";
    case StepKind::kKeepActivations: return "keep";
    case StepKind::kDropCheckpointInput: return "drop checkpoint input";
    case StepKind::kDropActivations: return "drop activations";
    case StepKind::kReduceWaitsForCompute: return "reduce waits for compute";
    case StepKind::kGradientReady: return "gradient";
    case StepKind::kFlushBucket: return "flush";
    case StepKind::kRelease: return "release";
    case StepKind::kForwardEnd: return "forward end";
    case StepKind::kBackwardComputeEnd: return "backward compute end";
    case StepKind::kEndOfBackward: return "end of backward";
    case StepKind::kOptimizerStep: return "optimizer step";
    case StepKind::kIterationEnd: return "iteration end";
  }
  return "?";
}

}  // namespace

std::string describe(const ProgramStep& step, std::span<const int> flush_params) {
  std::ostringstream out;
  out << name_of(step.kind);
  switch (step.kind) {
    case StepKind::kFetch:
    case StepKind::kOwnWork:
    case StepKind::kRelease:
      out << (step.phase == Phase::kForward ? " forward" : " backward");
      break;
    case StepKind::kKeepActivations:
      out << (step.kept == ActivationsKept::kAll ? " all" : " checkpoint input");
      break;
    default:
      break;
  }
  if (step.module >= 0) out << " module " << step.module;
  if (step.recompute) out << " (recompute)";
  if (step.kind == StepKind::kGradientReady) {
    out << " param " << step.param << " at " << step.bucket_offset_numel << " (" << step.numel << ")";
  }
  if (step.kind == StepKind::kFlushBucket) {
    out << " params";
    for (const int p : flush_params) out << ' ' << p;
    out << " (" << step.numel << ")";
  }
  return out.str();
}

RankProgram::RankProgram(const ModelSpec& model, CheckpointUnits checkpoint, std::int64_t reduce_bucket_numel,
                         std::int64_t grad_accum)
    : model_(model),
      checkpoint_(std::move(checkpoint)),
      grad_accum_(grad_accum),
      grad_uses_(gradient_uses(model)),
      bucket_(reduce_bucket_numel) {
  if (checkpoint_.unit.empty()) checkpoint_.unit.assign(model.modules.size(), false);
  if (checkpoint_.inside.empty()) checkpoint_.inside.assign(model.modules.size(), false);
}

const std::vector<ProgramStep>& RankProgram::iteration(std::int32_t iteration, const std::vector<char>& skipped) {
  steps_.clear();
  flush_params_.clear();
  grad_uses_left_ = grad_uses_;
  recomputing_ = false;
  skipped_ = &skipped;
  add(StepKind::kResetStep, -1, Phase::kForward);
  forward(0);
  add(StepKind::kForwardEnd, -1, Phase::kForward);
  backward(0);
  add(StepKind::kBackwardComputeEnd, -1, Phase::kBackward);
  // independent_gradient_partition_epilogue (stage3.py): the last bucket goes, then the host
  // synchronises the reduce stream.
  if (!bucket_.empty()) flush(0);
  add(StepKind::kEndOfBackward, -1, Phase::kBackward);
  if (optimizer_step(iteration)) add(StepKind::kOptimizerStep, -1, Phase::kBackward);
  add(StepKind::kIterationEnd, -1, Phase::kBackward);
  skipped_ = nullptr;
  if (journal_) {
    for (const ProgramStep& step : steps_) journal_->push_back(describe(step, flush_params(step)));
  }
  return steps_;
}

std::span<const int> RankProgram::flush_params(const ProgramStep& step) const {
  return std::span<const int>(flush_params_).subspan(static_cast<std::size_t>(step.flush_first),
                                                     static_cast<std::size_t>(step.flush_count));
}

bool RankProgram::skipped(int module) const {
  return !skipped_->empty() && (*skipped_)[static_cast<std::size_t>(module)] != 0;
}

ProgramStep& RankProgram::add(StepKind kind, int module, Phase phase) {
  ProgramStep& step = steps_.emplace_back();
  step.kind = kind;
  step.module = module;
  step.phase = phase;
  step.recompute = recomputing_;
  return step;
}

void RankProgram::forward(int module) {
  if (skipped(module)) return;
  const auto m = static_cast<std::size_t>(module);
  const ModuleSpec& spec = model_.modules[m];
  // Below a ZeRO-3 leaf no hooks fire: the leaf fetched this module's parameters.
  if (spec.z3_hooks) add(StepKind::kFetch, module, Phase::kForward);
  for (const int child : spec.children) forward(child);
  // The module's own work runs after its children (containers: residual adds, attention core).
  add(StepKind::kOwnWork, module, Phase::kForward);
  // Under checkpointing a unit keeps only its input in its first forward, and the modules inside
  // it keep nothing; they save their activations when backward re-runs the unit.
  if (!checkpoint_.inside[m] || recomputing_) {
    add(StepKind::kKeepActivations, module, Phase::kForward).kept = ActivationsKept::kAll;
  } else if (checkpoint_.unit[m]) {
    add(StepKind::kKeepActivations, module, Phase::kForward).kept = ActivationsKept::kCheckpointInput;
  }
  // Post-forward hook: post_sub_module_forward_function with its release_sub_module.
  if (spec.z3_hooks) add(StepKind::kRelease, module, Phase::kForward);
}

void RankProgram::backward(int module) {
  if (skipped(module)) return;
  const auto m = static_cast<std::size_t>(module);
  const ModuleSpec& spec = model_.modules[m];
  if (checkpoint_.unit[m]) {
    // torch.utils.checkpoint: the unit's forward runs again (its hooks fire, so DeepSpeed fetches
    // its parameters again) before its backward; the kept input goes, the full activations come back.
    add(StepKind::kDropCheckpointInput, module, Phase::kBackward);
    recomputing_ = true;
    forward(module);
    recomputing_ = false;
  }
  // Pre-backward hook: the output's gradient arrived.
  if (spec.z3_hooks) add(StepKind::kFetch, module, Phase::kBackward);
  // Own backward (data and weight gradients), then this module's gradient hooks; children follow
  // in reverse execution order (autograd order).
  add(StepKind::kOwnWork, module, Phase::kBackward);
  add(StepKind::kDropActivations, module, Phase::kBackward);
  // A ZeRO-3 leaf reduces its whole subtree's gradients once its backward is done (stage3.py).
  if (!spec.z3_leaf) gradients_ready(module);
  for (auto it = spec.children.rbegin(); it != spec.children.rend(); ++it) backward(*it);
  if (spec.z3_leaf) gradients_ready(module);
  // No post-backward hook for a module fed only token ids: its parameters stay gathered until the
  // optimizer step releases everything (ModuleSpec::post_backward_hook_fires).
  if (spec.z3_hooks && spec.post_backward_hook_fires) add(StepKind::kRelease, module, Phase::kBackward);
}

// Per-parameter gradient hooks (stage3.py): a parameter's gradient is final after its last use in
// backward (a tied weight: its second use). Each goes into the IPG bucket; a gradient that would
// overflow reduce_bucket_size flushes the bucket first.
void RankProgram::gradients_ready(int module) {
  bool waited = false;
  for (const int p : model_.modules[static_cast<std::size_t>(module)].param_ids) {
    if (--grad_uses_left_[static_cast<std::size_t>(p)] != 0) continue;
    const std::int64_t numel = model_.params[static_cast<std::size_t>(p)].numel;
    if (bucket_.must_flush_before(numel)) {
      flush(module);
      waited = false;
    }
    if (!waited) {
      add(StepKind::kReduceWaitsForCompute, module, Phase::kBackward);
      waited = true;
    }
    ProgramStep& step = add(StepKind::kGradientReady, module, Phase::kBackward);
    step.param = p;
    step.numel = numel;
    step.bucket_offset_numel = bucket_.numel();
    bucket_.add(p, numel);
  }
}

void RankProgram::flush(int module) {
  ProgramStep& step = add(StepKind::kFlushBucket, module, Phase::kBackward);
  step.flush_first = static_cast<std::int32_t>(flush_params_.size());
  step.flush_count = static_cast<std::int32_t>(bucket_.params().size());
  step.numel = bucket_.numel();
  flush_params_.insert(flush_params_.end(), bucket_.params().begin(), bucket_.params().end());
  bucket_.clear();
}

}  // namespace prefetchlab::core
