#pragma once
// Plans: what core::Coordinator asks its executor (the simulator or the real backend) to do.
// A plan is an ordered list of actions, performed in order on the host thread that made the
// call. The coordinator never touches a clock, a stream or a device; what each action costs,
// and on which stream it runs, is the executor's business (what DeepSpeed does:
// partitioned_param_coordinator.py, partition_parameters.py; see docs/architecture.md).
#include <cstdint>
#include <variant>
#include <vector>

#include "core/model/model_spec.hpp"
#include "core/zero/parameter_trace.hpp"
#include "core/zero/phase.hpp"

namespace prefetchlab::core {

enum class GatherKind { kOnDemand, kPrefetch, kPersistentRegather };

constexpr const char* gather_kind_name(GatherKind kind) {
  switch (kind) {
    case GatherKind::kOnDemand: return "on_demand";
    case GatherKind::kPrefetch: return "prefetch";
    case GatherKind::kPersistentRegather: return "persistent_regather";
  }
  return "?";
}

// One all-gather collective (all_gather_into_tensor), issued asynchronously. A coalesced gather
// of one dtype group: copy-in of this rank's shards into its slot of a flat buffer of
// padded_numel elements, then one collective on the all-gather stream. The parameters become
// in flight; they are usable only after a Wait on their handle.
struct Gather {
  std::int64_t gather_id = -1;  // unique for the coordinator's life, increasing in issue order
  // The DeepSpeed handle the collective belongs to: one per coalesced all-gather call (covering
  // every dtype group of that call), one per parameter with allgather_sequential.
  std::int64_t handle_id = -1;
  GatherKind kind = GatherKind::kOnDemand;
  DType dtype = DType::kBF16;
  std::vector<int> param_ids;      // sorted by ds_id (the order DeepSpeed flattens them in)
  std::int64_t numel = 0;          // sum of ds_numel (unpadded)
  std::int64_t padded_numel = 0;   // sum of ceil(ds_numel / W) * W: the gathered output buffer
  // False when world_size == 1: DeepSpeed then uses a no-gather handle and launches no
  // collective (the shard already is the whole parameter); waiting on such a handle
  // synchronises the current stream on CUDA (NoGatherCoalescedHandle.wait).
  bool collective = true;
};

enum class WaitContext {
  // fetch_sub_module's wait loop, under the all-gather stream: drop completed fetch events; if
  // more than 2 remain the host blocks on the oldest; then handle.wait() (a stream-level wait,
  // plus copy-out the first time the handle is waited on); then record a new fetch event.
  kFetch,
  // reset_step / trace invalidation / release_and_reset_all: handle.wait() on the current
  // stream, no throttle and no fetch event.
  kDrain,
  // the persistent re-gather after the optimizer step: a blocking call, the host waits for the
  // collective to finish.
  kBlocking,
};

// Wait for a handle. The executor makes the waiting stream depend on every collective of the
// handle (all already complete ones are free).
struct Wait {
  int param_id = -1;  // the in-flight registry entry popped; -1 for a whole-handle blocking wait
  std::int64_t handle_id = -1;
  std::vector<std::int64_t> gather_ids;  // every collective of that handle
  WaitContext context = WaitContext::kFetch;
  // First wait on the handle: it materialises all the handle's parameters (DeepSpeed copies
  // each out of the flat buffer, so a coalesced bucket transiently costs ~2x its size).
  bool first_on_handle = false;
  // No registry entry references the handle any more: its flat buffers can be freed.
  bool last_on_handle = false;
};

// Parameters partitioned again (their gathered buffers freed); n_available -= numel.
struct Release {
  std::vector<int> param_ids;
  std::int64_t numel = 0;
};

// current_stream().wait_stream(allgather_stream) at the end of the wait loop: compute now
// depends on *everything* issued on the all-gather stream so far, earlier prefetches included.
struct ComputeWaitsForAllGather {};

// A prefetch round starts (COMPLETE trace, bucket > 0). DeepSpeed issues it after the wait;
// the prefetch Gathers of the round, if any, follow this marker.
struct PrefetchRound {
  std::int64_t budget_numel = 0;  // min(max_live - n_available, bucket); <= 0 selects nothing
};

// trace_prologue found a divergence from the recorded trace: from here the iteration runs
// without prefetch, the next one records, the one after prefetches again. The in-flight
// parameters are drained (Wait + Release actions follow).
struct TraceInvalidated {
  int step_id = -1;
  int expected_module = -1;  // -1 when step_id >= trace_length
  int actual_module = -1;
  int trace_length = 0;
};

// reset_step in a non-COMPLETE mode runs assert_ints_same_as_other_ranks on `lists` lists
// (1: the module trace; 3 when a recording completes: modules, param ids, param steps). Each is
// two blocking broadcasts from rank 0 plus a device-to-host copy. The coordinator is one rank's
// view: comparing Coordinator::parameter_trace() / recorded_modules() across ranks, and
// reporting a mismatch, is the executor's job.
struct RankTraceCheck {
  int lists = 0;
};

// Inside Coordinator::optimizer_step(): where the optimizer update itself runs (after every
// parameter was partitioned, before the persistent re-gather).
struct OptimizerUpdate {};

using PlanAction = std::variant<Gather, Wait, Release, ComputeWaitsForAllGather, PrefetchRound,
                                TraceInvalidated, RankTraceCheck, OptimizerUpdate>;

struct Plan {
  std::vector<PlanAction> actions;
};

struct ParamCount {
  int params = 0;
  std::int64_t numel = 0;
  friend bool operator==(const ParamCount&, const ParamCount&) = default;
};

// What one fetch_sub_module call found and did, for metrics and controllers.
struct FetchInfo {
  int module = -1;
  Phase phase = Phase::kForward;
  int step_id = -1;                       // the step this fetch had (before the increment)
  TraceMode trace_mode = TraceMode::kInvalid;  // after the trace prologue
  bool trace_invalidated = false;         // this call invalidated the trace
  // The module's own parameters, classified after the prologue:
  ParamCount on_demand;   // not available: gathered now, compute waits for that gather
  ParamCount in_flight;   // in the in-flight registry (issued earlier, e.g. prefetched): waited on
  ParamCount available;   // already resident (kept, persistent, or gathered for another module)
  ParamCount prefetched;  // issued by this call's prefetch round
  std::int64_t n_available_numel = 0;  // after the call
};

struct FetchPlan {
  Plan plan;
  FetchInfo info;
};

}  // namespace prefetchlab::core
