#pragma once
// DeepSpeed ZeRO-3 coordinator host-cost terms fitted from a real run's python_function events
// (with_stack=True): fetch_sub_module, all_gather_coalesced and release_sub_module, each call's
// own time regressed (median regression) on the counts the host-cost model prices
// (core/hardware/calibration.hpp, sim/cost/host_cost_model.hpp):
//   fetch_sub_module     = call + per_param x params + per_inflight_param x handle waits
//                          + gather_round x __all_gather_params rounds
//                          (own time: less its all_gather_coalesced calls and its blocking)
//   all_gather_coalesced = call + per_param x params   (less its copy-in's launch)
//   release_sub_module   = call + per_param x params + per_freed_param x _partition_param calls
//   __reduce_and_partition_ipg_grads (stage3.py, one gradient bucket's flush)
//                        = reduce_scatter call + per_param x the bucket's parameters
//                          (less its blocking and its launches outside the collective call)
// The rounds, waits and partitions are counted from the frames nested in each call. A call's
// parameter count is not in the trace: it comes from the traced job's scenario, whose
// simulation gives one iteration's calls in order (CoordinatorCallCounts); each traced step's
// calls pair with them by position, and a step whose call count differs is not paired.
#include <cstdint>
#include <string>
#include <vector>

#include "core/hardware/calibration.hpp"
#include "core/trace_import/trace_set.hpp"

namespace prefetchlab::core {

// One steady iteration's coordinator calls on one rank, in call order, each with its parameter
// count, as the scenario makes them.
struct CoordinatorCallCounts {
  std::vector<std::int64_t> fetch_params;    // per fetch_sub_module: the module's parameters
  std::vector<std::int64_t> gather_params;   // per all_gather_coalesced issued by a fetch
  std::vector<std::int64_t> release_params;  // per release_sub_module: the module's parameters
  std::vector<std::int64_t> reduce_params;   // per __reduce_and_partition_ipg_grads: the bucket's
};

struct CoordinatorTerm {
  std::string term;        // the profile key: host_fetch_call_us, ...
  std::string function;    // the DeepSpeed function whose calls it is fitted from
  bool fitted = false;
  double value_us = 0;     // at host_speed 1; when not fitted, the base profile's value
  std::string why_not;     // when not fitted: held at the base's value, and why
};

struct CoordinatorFunctionFit {
  std::string function;
  std::int64_t calls = 0;          // paired calls behind the fit
  double residual_p10_us = 0, residual_p90_us = 0;  // own time minus the fitted line
};

struct CoordinatorFit {
  std::vector<CoordinatorTerm> terms;
  std::vector<CoordinatorFunctionFit> functions;
  std::int64_t steps_paired = 0;
  std::vector<std::string> not_fitted;  // steps not paired, functions with too few calls, and why
};

// `host_speed`: the traced host's, when it was fitted (> 0; else 1). The traced times are at that
// speed; the terms are given at host_speed 1 (times host_speed), as a profile takes them, and a
// held term's base value is charged at the traced speed (base / host_speed).
CoordinatorFit fit_coordinator_terms(const TraceSet& set, const CoordinatorCallCounts& per_iteration,
                                     const CalibrationConstants& base, double host_speed);

}  // namespace prefetchlab::core
