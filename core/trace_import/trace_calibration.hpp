#pragma once
// What a real run's traces can calibrate, fitted: collective latency and bus bandwidth per
// operation (least squares of the cross-rank true times over sizes, the same form and fit as
// nccl-tests logs), the host's speed from its torch-level collective calls, and the launch cost.
// Each figure keeps how many events support it; what cannot be fitted says why.
#include <cstdint>
#include <string>
#include <vector>

#include "core/hardware/collective_fit.hpp"
#include "core/trace_import/trace_set.hpp"

namespace prefetchlab::core {

// Bytes of one element of a trace's dtype name ("Float", "BFloat16", "c10::Half", "float",
// "int64"); 0 when unknown.
int dtype_bytes(const std::string& dtype);

struct TraceCollectiveFit {
  CollectiveKind kind = CollectiveKind::kOther;
  std::int64_t group_size = 0;
  std::int64_t events = 0;           // matched collectives behind the points
  std::vector<FitPoint> points;      // per distinct size: the median true time
  CollectiveFit fit;                 // valid when `fitted`
  bool fitted = false;
  std::string why_not;               // when not fitted
};

struct TraceCalibration {
  std::vector<TraceCollectiveFit> collectives;  // all_gather, reduce_scatter, all_reduce groups
  // Host: the median torch-level collective call (c10d::*), all ranks.
  std::int64_t host_call_events = 0;
  double host_call_median_us = 0;
  CollectiveKind host_call_kind = CollectiveKind::kOther;
  // host_speed = host_call_reference_us / host_call_median_us: the simulator's host defaults are
  // anchored at a torch-level collective call costing 115 us on a GPU server, 84 us for an
  // in-place all_reduce (core/hardware/calibration.hpp).
  double host_speed = 0;
  // host_speed's reference: what the simulator's defaults charge for one call of
  // host_call_kind on a GPU server (an in-place all_reduce is cheaper than the others).
  double host_call_reference_us = 0;
  // DeepSpeed's module hooks from python_function events (with_stack=True): each hook
  // function's own time (its fetch or release left out; the wrapper's where a trace shows only
  // the wrapper), median over its calls, and the backward hooks' set-up (the forward wrappers'
  // own work around their hook functions), at host_speed 1 (times host_speed when that was
  // fitted). `term` is the profile key (host_*_hook_us, host_backward_hook_setup_us).
  struct HookTerm {
    std::string term;
    std::string function;  // the DeepSpeed function measured
    std::int64_t events = 0;
    double own_median_us = 0;  // as recorded
    double value_us = 0;       // at host_speed 1
  };
  std::vector<HookTerm> hook_terms;
  bool python_frames = false;  // any rank has python_function events (with_stack=True)
  std::int64_t launch_events = 0;
  double launch_median_us = 0;
  std::vector<std::string> not_fitted;  // what the traces cannot calibrate, and why
};

inline constexpr double kHostCallReferenceUs = 115.0;
inline constexpr double kAllReduceCallReferenceUs = 84.0;  // host_all_reduce_call_ns's default
// Below this largest size a fit's slope is noise on the latency (a few small all-reduces of
// flags would give a bus bandwidth of MB/s): no bandwidth is fitted.
inline constexpr std::int64_t kMinBandwidthBytes = std::int64_t{1} << 20;

TraceCalibration calibrate_from_traces(const TraceSet& set, double tolerance);

}  // namespace prefetchlab::core
