#pragma once
// DeepSpeed ZeRO-3's Python frames on a rank's host thread, as torch.profiler records them with
// with_stack=True (python_function events), for the Kineto-schema export of a simulated run
// (sim/export/kineto_trace.cpp). The host program (sim/ranks/rank_process.cpp) charges each host-cost term
// where DeepSpeed's code runs it; these frames mark where each of those functions began and
// ended, so a simulated trace carries the same nesting a real one does and
// `calibrate --from-trace` fits the same terms from both (core/trace_import/coordinator_fit.hpp).
//
// The functions and their nesting (deepspeedai/DeepSpeed, deepspeed/runtime/zero/
// parameter_offload.py, partitioned_param_coordinator.py, partition_parameters.py):
//   _pre_forward_module_hook > pre_sub_module_forward_function > fetch_sub_module
//       > __all_gather_params (one per round) > all_gather_coalesced (one per call)
//       > wait (AllGatherCoalescedHandle.wait, one per in-flight parameter)
//   _post_forward_module_hook > post_sub_module_forward_function > release_sub_module
//       > _partition_param (one per parameter it partitions)
//   __reduce_and_partition_ipg_grads (stage3.py: one per gradient bucket flushed)
// (the backward hooks alike), the host's blocking as cudaEventSynchronize and the copy-in's
// launch in all_gather_coalesced as cudaLaunchKernel.
#include <cstdint>
#include <vector>

#include "core/trace_import/coordinator_fit.hpp"
#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

enum class DeepSpeedFrame : std::uint8_t {
  kPreForwardHook,
  kPreForwardFunction,
  kPreBackwardHook,
  kPreBackwardFunction,
  kPostForwardHook,
  kPostForwardFunction,
  kPostBackwardHook,
  kPostBackwardFunction,
  kFetch,
  kGatherRound,
  kAllGatherCoalesced,
  kHandleWait,
  kRelease,
  kPartitionParam,
  kReduceIpgGrads,    // stage3.py __reduce_and_partition_ipg_grads: one gradient bucket's flush
  kEventSynchronize,  // CUDA runtime calls, not Python frames: the host blocked,
  kKernelLaunch,      // and all_gather_coalesced's copy-in launched
};

// The profiler's event name: "deepspeed/runtime/zero/partitioned_param_coordinator.py(0):
// fetch_sub_module" (line 0: a simulated frame has no source line), or "cudaEventSynchronize".
const char* deepspeed_frame_name(DeepSpeedFrame frame);
inline bool is_python_frame(DeepSpeedFrame frame) {
  return frame != DeepSpeedFrame::kEventSynchronize && frame != DeepSpeedFrame::kKernelLaunch;
}

struct HostFrame {
  TimeNs start_ns = 0;
  TimeNs duration_ns = 0;
  std::int32_t iteration = 0;
  // fetch_sub_module, release_sub_module: the module's direct parameters; all_gather_coalesced:
  // the parameters it gathers; __reduce_and_partition_ipg_grads: the bucket's parameters; else
  // -1. The call's counts as the scenario makes them.
  std::int32_t params = -1;
  DeepSpeedFrame frame = DeepSpeedFrame::kFetch;
  std::uint8_t depth = 0;  // orders frames that start and end together: the caller first
};

// One rank's frames, in the order their calls ended (a caller after its callees).
using HostFrameLog = std::vector<HostFrame>;

// The last iteration's fetch_sub_module, all_gather_coalesced and release_sub_module calls in
// `frames`, in call order, with their parameter counts: what `calibrate --from-trace` pairs a
// traced step's calls with.
core::CoordinatorCallCounts coordinator_call_counts(const HostFrameLog& frames);

}  // namespace prefetchlab::sim
