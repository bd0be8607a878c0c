#pragma once
// DeepSpeed's per-rank host program for one iteration, written once: the order in which the
// hooks fire over the module tree (parameter_offload.py's forward and backward hooks, with
// torch.utils.checkpoint's re-run forward), when a gradient is final and goes into the IPG
// bucket, when the bucket is reduced, and what closes the iteration (stage3.py's
// end-of-backward synchronisation, the optimizer step at an accumulation boundary).
//
// RankProgram turns an iteration into a sequence of RankSteps; the simulator
// (sim/ranks/rank_process.cpp) and the real backend (gpu_backend/executor/rank_executor.cpp) each perform
// every step on their own streams, memory and collectives, and decide none of the order
// themselves. What a step does inside (which gathers a fetch issues) is the Coordinator's plan.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/model/checkpoint_units.hpp"
#include "core/model/model_spec.hpp"
#include "core/zero/phase.hpp"
#include "core/zero/reduce_bucket.hpp"

namespace prefetchlab::core {

enum class StepKind : std::uint8_t {
  // Root forward pre-hook: Coordinator::reset_step's plan, then the controller's update
  // (core/control/prefetch_controller.hpp, steps 1-3) and the prefetch bucket it sets.
  kResetStep,
  kFetch,            // a module's pre-forward / pre-backward hook: fetch_sub_module (`phase`)
  kOwnWork,          // the module's own kernels in `phase`, after its children's in forward
  kKeepActivations,  // forward: what the module keeps for its backward (`kept`)
  // Backward of a checkpoint unit, before the unit's forward runs again: its kept input goes.
  kDropCheckpointInput,
  kDropActivations,  // backward, after the module's own work: what it kept goes
  kReduceWaitsForCompute,  // the reduce stream waits for the compute stream's work so far
  // `param`'s gradient is final (its last use in backward): into the IPG bucket, at
  // `bucket_offset_numel` of it; `numel` elements.
  kGradientReady,
  // The IPG bucket is reduced: flush_params(step), `numel` elements in all; `module` is the
  // hook that flushes (the root at the end of backward).
  kFlushBucket,
  kRelease,  // a module's post-forward / post-backward hook: release_sub_module (`phase`)
  kForwardEnd,
  kBackwardComputeEnd,
  kEndOfBackward,  // the host synchronises with the reduce stream (any last flush came before)
  kOptimizerStep,  // an accumulation boundary: Coordinator::optimizer_step's plan
  kIterationEnd,
};

// What a module keeps from its forward for its backward.
enum class ActivationsKept : std::uint8_t {
  kAll,              // its saved activations
  kCheckpointInput,  // a checkpoint unit's first forward: only the unit's input
};  // (a module inside a unit keeps nothing in the unit's first forward: no step)

struct ProgramStep {
  StepKind kind = StepKind::kIterationEnd;
  Phase phase = Phase::kForward;
  bool recompute = false;  // inside a checkpoint unit's forward re-run during backward
  ActivationsKept kept = ActivationsKept::kAll;
  int module = -1;
  int param = -1;
  std::int64_t numel = 0;
  std::int64_t bucket_offset_numel = 0;
  std::int32_t flush_first = 0;  // kFlushBucket: its parameters in RankProgram::flush_params
  std::int32_t flush_count = 0;

  bool operator==(const ProgramStep&) const = default;
};

// One line per step ("fetch forward module 3", "gradient param 7 at 0 (4096)"): for logs and
// for tests that hold two backends' programs against each other.
std::string describe(const ProgramStep& step, std::span<const int> flush_params);

class RankProgram {
 public:
  // `checkpoint`: training.activation_checkpointing's units (all false without it);
  // `reduce_bucket_numel`: zero.reduce_bucket_size; `grad_accum`: micro-batches per step.
  RankProgram(const ModelSpec& model, CheckpointUnits checkpoint, std::int64_t reduce_bucket_numel,
              std::int64_t grad_accum);

  // The steps of iteration `iteration` (1-based). `skipped`, one flag per module (empty: none),
  // names the modules that do not run on this rank this iteration (data-dependent control flow,
  // an expert no token was routed to): neither they nor their subtrees fire a hook. The result
  // stays valid until the next call.
  const std::vector<ProgramStep>& iteration(std::int32_t iteration, const std::vector<char>& skipped);
  // The parameters a kFlushBucket step reduces, in the order they went into the bucket.
  std::span<const int> flush_params(const ProgramStep& step) const;
  bool optimizer_step(std::int32_t iteration) const { return iteration % grad_accum_ == 0; }

  // Appends every step of every later iteration() to `journal` as describe() writes it (null:
  // none): for logs, and for tests that hold two backends against each other.
  void journal_into(std::vector<std::string>* journal) { journal_ = journal; }

 private:
  bool skipped(int module) const;
  void forward(int module);
  void backward(int module);
  void gradients_ready(int module);
  void flush(int module);
  ProgramStep& add(StepKind kind, int module, Phase phase);

  const ModelSpec& model_;
  CheckpointUnits checkpoint_;
  std::int64_t grad_accum_;
  std::vector<int> grad_uses_;
  // This iteration's.
  const std::vector<char>* skipped_ = nullptr;
  std::vector<ProgramStep> steps_;
  std::vector<int> grad_uses_left_;
  std::vector<int> flush_params_;  // every flush's parameters, one after another
  ReduceBucket bucket_;
  bool recomputing_ = false;
  std::vector<std::string>* journal_ = nullptr;
};

}  // namespace prefetchlab::core
