#pragma once
// core::Coordinator — one rank's DeepSpeed PartitionedParameterCoordinator (ZeRO-3 fetch,
// prefetch, release) as a pure state machine. Every call returns a Plan that the executor
// performs in order; see core/zero/fetch_plan.hpp. Behaviour follows deepspeedai/DeepSpeed's
// deepspeed/runtime/zero/partitioned_param_coordinator.py (master), called where
// parameter_offload.py's hooks call it; docs/architecture.md summarises it.
//
// Call protocol (what DeepSpeed's hooks do):
//   forward of the root:   reset_step()                  (once per forward / micro-batch)
//   module pre-forward:    fetch_sub_module(m, kForward)  (trace prologue + record + fetch)
//   module post-forward:   release_sub_module(m, kForward)
//   module pre-backward:   fetch_sub_module(m, kBackward) (modules in backward execution order)
//   module post-backward:  release_sub_module(m, kBackward)
//   optimizer step:        optimizer_step()  (= release_and_reset_all, update, persistent gather)
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <set>
#include <utility>
#include <vector>

#include "core/zero/coordinator_config.hpp"
#include "core/zero/fetch_plan.hpp"
#include "core/model/model_spec.hpp"
#include "core/zero/parameter_trace.hpp"
#include "core/zero/phase.hpp"

namespace prefetchlab::core {

// DeepSpeed's ZeroParamStatus.
enum class ParamState { kNotAvailable, kInflight, kAvailable };

class Coordinator {
 public:
  // Copies what it needs from the model (the model need not outlive the coordinator).
  // Throws std::invalid_argument on a bad config or a parameter index out of range.
  Coordinator(const ModelSpec& model, CoordinatorConfig config);

  // Start of a forward (root pre-forward hook): drain the in-flight registry (wait + release),
  // advance the trace mode (INVALID -> RECORD -> COMPLETE), reset the fetch queue, the
  // "most recent step fetched for" map, the step and n_available.
  Plan reset_step();

  // trace_prologue (divergence check in COMPLETE), record_module (in RECORD), then the fetch:
  // on-demand gather, wait loop, compute-waits-for-all-gather, own-entry queue consumption and
  // a prefetch round (COMPLETE only), step += 1. Throws std::out_of_range for a bad module and
  // std::logic_error for DeepSpeed's "tracing error" (cannot happen with a consistent caller).
  FetchPlan fetch_sub_module(int module, Phase phase);

  // Release the module's parameters that may go (persistence, reuse distance, other users).
  Plan release_sub_module(int module, Phase phase);

  // stage3 _partition_all_parameters: wait for anything in flight and partition every
  // parameter, persistent ones included.
  Plan release_and_reset_all();
  // stage3 _post_step: gather every persistent parameter in one blocking call.
  Plan regather_persistent();
  // The optimizer step as stage3.step() does it: release_and_reset_all, an OptimizerUpdate
  // marker, then regather_persistent.
  Plan optimizer_step();

  void set_prefetch_bucket_numel(std::int64_t numel);  // >= 0; effective from the next fetch
  std::int64_t prefetch_bucket_numel() const { return prefetch_bucket_numel_; }

  TraceMode trace_mode() const { return mode_; }
  // May be negative between optimizer_step() and the next reset_step(), as in DeepSpeed
  // (release subtracts numel that the reset no longer counts).
  std::int64_t n_available_numel() const { return n_available_numel_; }
  int step_id() const { return step_id_; }
  ParamState param_state(int param) const;
  bool is_persistent(int param) const;
  bool in_flight(int param) const;  // in the in-flight registry
  // The module trace recorded so far (RECORD) or frozen (COMPLETE); empty when INVALID.
  const std::vector<int>& recorded_modules() const { return recorded_modules_; }
  // The parameter trace of the frozen recording (COMPLETE); empty otherwise.
  const ParameterTrace& parameter_trace() const { return trace_; }
  // Entries of parameter_trace().params() already popped off the fetch queue this iteration.
  std::size_t fetch_queue_position() const { return queue_pos_; }
  const CoordinatorConfig& config() const { return config_; }
  int num_params() const { return static_cast<int>(param_numel_.size()); }
  int num_modules() const { return static_cast<int>(module_params_.size()); }

 private:
  struct Handle {
    std::vector<std::int64_t> gather_ids;
    std::vector<int> param_ids;
    int registry_refs = 0;
    bool complete = false;
    bool live = true;
  };

  void invalidate_trace(int module, Plan& plan);
  void drain_inflight(Plan& plan);
  void all_gather(std::vector<int> params, GatherKind kind, Plan& plan);
  std::int64_t new_handle(std::vector<int> params);
  void emit_gather(std::int64_t handle, std::vector<int> params, GatherKind kind, Plan& plan);
  void pop_and_wait(int param, WaitContext context, Plan& plan);
  void release_param(int param, Plan& plan);
  void clear_per_iteration_state();
  const std::vector<int>& params_to_release(int module, int step);
  void check_param(int param) const;
  void check_module(int module) const;

  // Model, copied at construction.
  std::vector<std::int64_t> param_numel_;
  std::vector<DType> param_dtype_;
  std::vector<bool> persistent_;
  std::vector<std::vector<int>> module_params_;  // direct params, sorted by ds_id, unique

  CoordinatorConfig config_;
  std::int64_t prefetch_bucket_numel_ = 0;

  // Parameter state.
  std::vector<ParamState> state_;
  // ds_active_sub_modules: a parameter is active in one or two modules at a time, so a small
  // vector beats a node-based set on the hot path.
  std::vector<std::vector<int>> active_modules_;
  // In-flight registry: param -> handle, iterated in insertion order (a Python dict).
  std::vector<int> registry_order_;
  std::vector<std::int64_t> registry_handle_;  // -1 when not in the registry
  // Live handles by id: ids only grow and a handle lives at most about one iteration, so a
  // window [handles_base_, handles_base_ + size) replaces a tree (no node per gather).
  std::deque<Handle> handles_;
  std::int64_t handles_base_ = 0;
  Handle& handle(std::int64_t id) { return handles_[static_cast<std::size_t>(id - handles_base_)]; }
  void erase_handle(std::int64_t id);
  std::int64_t next_handle_id_ = 0;
  std::int64_t next_gather_id_ = 0;
  std::int64_t n_available_numel_ = 0;

  // Trace state.
  TraceMode mode_ = TraceMode::kInvalid;
  std::vector<int> recorded_modules_;  // __submodule_order
  ParameterTrace trace_;               // __param_order (COMPLETE only)
  std::size_t queue_pos_ = 0;          // the fetch queue is trace_.params()[queue_pos_..]
  std::vector<std::int64_t> most_recent_step_;  // __most_recent_step_id_param_fetched_for
  int step_id_ = 0;
  // __params_to_release is functools.lru_cache'd on (module, step_id) and never cleared, not
  // even when the trace is invalidated and re-recorded; kept identical here.
  // Indexed by step, then a short list of (module, release candidates): a step almost always
  // has one module, so a lookup is an index and a one-element scan (no hashing).
  std::vector<std::vector<std::pair<int, std::vector<int>>>> release_cache_;
  std::vector<char> selected_scratch_;  // per-param marks for one prefetch round
  // Reused by every fetch (the queue consumption of step D), so a fetch allocates no scratch.
  std::vector<int> expected_scratch_;
  std::vector<int> discarded_scratch_;
};

}  // namespace prefetchlab::core
