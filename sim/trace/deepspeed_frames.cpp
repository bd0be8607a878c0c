#include "sim/trace/deepspeed_frames.hpp"

#include <algorithm>

namespace prefetchlab::sim {

const char* deepspeed_frame_name(DeepSpeedFrame frame) {
  switch (frame) {
    case DeepSpeedFrame::kPreForwardHook: return "deepspeed/runtime/zero/parameter_offload.py(0): _pre_forward_module_hook";
    case DeepSpeedFrame::kPreForwardFunction:
      return "deepspeed/runtime/zero/parameter_offload.py(0): pre_sub_module_forward_function";
    case DeepSpeedFrame::kPreBackwardHook: return "deepspeed/runtime/zero/parameter_offload.py(0): _pre_backward_module_hook";
    case DeepSpeedFrame::kPreBackwardFunction:
      return "deepspeed/runtime/zero/parameter_offload.py(0): pre_sub_module_backward_function";
    case DeepSpeedFrame::kPostForwardHook: return "deepspeed/runtime/zero/parameter_offload.py(0): _post_forward_module_hook";
    case DeepSpeedFrame::kPostForwardFunction:
      return "deepspeed/runtime/zero/parameter_offload.py(0): post_sub_module_forward_function";
    case DeepSpeedFrame::kPostBackwardHook:
      return "deepspeed/runtime/zero/parameter_offload.py(0): _post_backward_module_hook";
    case DeepSpeedFrame::kPostBackwardFunction:
      return "deepspeed/runtime/zero/parameter_offload.py(0): post_sub_module_backward_function";
    case DeepSpeedFrame::kFetch: return "deepspeed/runtime/zero/partitioned_param_coordinator.py(0): fetch_sub_module";
    case DeepSpeedFrame::kGatherRound:
      return "deepspeed/runtime/zero/partitioned_param_coordinator.py(0): __all_gather_params";
    case DeepSpeedFrame::kAllGatherCoalesced: return "deepspeed/runtime/zero/partition_parameters.py(0): all_gather_coalesced";
    case DeepSpeedFrame::kHandleWait: return "deepspeed/runtime/zero/partition_parameters.py(0): wait";
    case DeepSpeedFrame::kRelease: return "deepspeed/runtime/zero/partitioned_param_coordinator.py(0): release_sub_module";
    case DeepSpeedFrame::kPartitionParam: return "deepspeed/runtime/zero/partition_parameters.py(0): _partition_param";
    case DeepSpeedFrame::kReduceIpgGrads: return "deepspeed/runtime/zero/stage3.py(0): __reduce_and_partition_ipg_grads";
    case DeepSpeedFrame::kEventSynchronize: return "cudaEventSynchronize";
    case DeepSpeedFrame::kKernelLaunch: return "cudaLaunchKernel";
  }
  return "";
}

core::CoordinatorCallCounts coordinator_call_counts(const HostFrameLog& frames) {
  std::int32_t last = 0;
  for (const HostFrame& f : frames) last = std::max(last, f.iteration);
  std::vector<const HostFrame*> ordered;
  for (const HostFrame& f : frames) {
    if (f.iteration == last) ordered.push_back(&f);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const HostFrame* a, const HostFrame* b) { return a->start_ns < b->start_ns; });
  core::CoordinatorCallCounts counts;
  for (const HostFrame* f : ordered) {
    if (f->frame == DeepSpeedFrame::kFetch) counts.fetch_params.push_back(f->params);
    if (f->frame == DeepSpeedFrame::kAllGatherCoalesced) counts.gather_params.push_back(f->params);
    if (f->frame == DeepSpeedFrame::kRelease) counts.release_params.push_back(f->params);
    if (f->frame == DeepSpeedFrame::kReduceIpgGrads) counts.reduce_params.push_back(f->params);
  }
  return counts;
}

}  // namespace prefetchlab::sim
