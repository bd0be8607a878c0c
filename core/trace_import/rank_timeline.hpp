#pragma once
// One rank's trace, analysed: its steps, its collectives (the transfers on the device, or gloo's
// work items), its host-side collective calls, what the device computed, and its memory. Built
// from one TraceFile; the cross-rank view is in trace_set.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace_import/collective_kind.hpp"
#include "core/trace_import/trace_file.hpp"

namespace prefetchlab::core {

struct TimelineOptions {
  // A trace without ProfilerStep#N markers (a legacy export of one iteration) is one step.
  bool whole_file_step = false;
  // Steps delimited by the starts of the events of this name (e.g. the optimizer's
  // "Optimizer.zero_grad#SGD.zero_grad"): step i runs from the i-th to the (i+1)-th; for traces
  // recorded without a profiler schedule. Empty: ProfilerStep#N.
  std::string step_marker;
};

struct RankStep {
  std::int64_t number = 0;  // N of ProfilerStep#N; -1 for a whole-file step
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;  // the host-side step window
  std::int64_t compute_busy_ns = 0;   // union of compute work (non-collective kernels; host ops on a CPU-only trace)
  std::int64_t exposed_comm_ns = 0;   // collective time while no compute ran
  std::int64_t peak_allocated_bytes = -1;      // device ([memory] Device Type 1); -1 without events
  std::int64_t peak_cpu_allocated_bytes = -1;  // host allocator (Device Type 0)
};

// One collective as this rank ran it: an NCCL kernel (its span includes waiting for the slowest
// peer) or a gloo work item.
struct RankCollective {
  CollectiveKind kind = CollectiveKind::kOther;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t in_nelems = -1;   // metadata; -1 when the file does not say
  std::int64_t out_nelems = -1;
  std::int64_t elements = -1;    // the full buffer: max(in, out), else "Input Dims"; -1 unknown
  std::string dtype;
  std::string process_group;     // "" when the file does not say
  std::int64_t group_size = -1;
  std::int64_t seq = -1;
  int step = -1;                 // index into RankTimeline::steps; -1 outside every step
};

// A host-side collective call (the outermost of c10d::*, record_param_comms, nccl:* on a thread).
struct HostCollectiveCall {
  CollectiveKind kind = CollectiveKind::kOther;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  bool autograd_thread = false;  // issued from backward (pt_autograd_N)
  int step = -1;
};

// One call of a DeepSpeed ZeRO-3 hook or coordinator function, from a python_function event
// (with_stack=True): `.../deepspeed/runtime/zero/parameter_offload.py(353): _pre_forward_module_hook`.
// Its duration includes what it calls (the fetch inside a hook, the collectives inside a fetch)
// and the Python tracer's own overhead.
struct HostHookCall {
  std::string function;  // "_pre_forward_module_hook", "fetch_sub_module", ...
  std::int64_t duration_ns = 0;
  int step = -1;
  // The time of the coordinator calls (fetch_sub_module, release_sub_module) nested in it, the
  // outermost of each: duration_ns minus this is a hook's own time, as the host-cost model's
  // hook terms count it (core/hardware/calibration.hpp).
  std::int64_t coordinator_ns = 0;
  bool nested_in_hook = false;  // called from inside another of these DeepSpeed functions
  // What a coordinator call's own time leaves out and the counts its host-cost terms take
  // (core/trace_import/coordinator_fit.hpp), from the events nested in it:
  //   fetch_sub_module: its all_gather_coalesced calls' time, its blocking (cuda/hip
  //   *Synchronize calls), its __all_gather_params rounds, and its handle waits (the
  //   AllGatherCoalescedHandle.wait of each in-flight parameter, partition_parameters.py);
  //   release_sub_module: the parameters it partitions (_partition_param);
  //   all_gather_coalesced: its kernel launches outside the torch-level collective call (the
  //   copy-in, charged as kernel_launch_us);
  //   __reduce_and_partition_ipg_grads: its blocking and its launches outside the collective
  //   call (the bucket's copies and divide).
  std::int64_t gather_ns = 0;
  std::int64_t blocked_ns = 0;
  std::int64_t launch_ns = 0;
  std::int64_t gather_rounds = 0;
  std::int64_t handle_waits = 0;
  std::int64_t partitioned_params = 0;
  // A module-hook wrapper (_pre_forward_module_hook, ...): the time of the hook function it calls
  // (pre_sub_module_forward_function, ...); the rest of its own time is the wrapper's own work
  // (the autograd Functions that fire the backward hooks are applied there).
  std::int64_t hook_function_ns = 0;
  bool in_fetch = false;  // all_gather_coalesced called from fetch_sub_module (not the step's re-gather)
};

// The module-hook wrapper that calls a DeepSpeed hook function (pre_sub_module_forward_function
// -> _pre_forward_module_hook, ...); null for any other function.
const char* hook_wrapper_of(const std::string& function);

// A CUDA/HIP runtime call in which the host blocks: cudaEventSynchronize, cudaStreamSynchronize,
// cudaDeviceSynchronize (and hip*).
bool is_synchronize_call(const std::string& name);

// fetch_sub_module or release_sub_module: the coordinator calls a hook's own time leaves out.
bool is_deepspeed_coordinator_function(const std::string& function);

// The DeepSpeed functions host_hook_calls collects (docs/traces.md).
bool is_deepspeed_hook_function(const std::string& function);

struct RankTimeline {
  std::string path;
  std::int64_t rank = 0;
  bool rank_from_file = false;     // distributedInfo.rank; else the position among the files
  std::int64_t world_size = -1;
  std::string backend;
  std::vector<std::string> device_names;  // deviceProperties' names: the GPUs the trace ran on
  bool gloo_work = false;          // gloo's worker-thread events (gloo:all_gather, ...) were seen
  bool absolute_clock = true;      // false for legacy exports (per-process relative time)
  bool has_gpu_kernels = false;
  std::vector<RankStep> steps;
  std::vector<RankCollective> collectives;  // by start time
  std::vector<HostCollectiveCall> host_calls;
  std::vector<HostHookCall> hook_calls;  // DeepSpeed's, in start order
  std::int64_t memory_events = 0;
  std::int64_t gpu_memory_events = 0;
  std::string autograd_thread;     // its name; empty when none was seen
  std::int64_t autograd_thread_ops = 0;
  std::int64_t forward_backward_links = 0;  // fwdbwd flow pairs
  std::int64_t launch_links = 0;            // kernels tied to their launch (correlation or ac2g)
  std::int64_t python_function_events = 0;
  std::vector<std::int64_t> launch_call_ns;  // host durations of kernel launches (cudaLaunchKernel*, hipLaunchKernel*)
  std::vector<std::string> missing;  // facts this file cannot provide, and why
};

// Throws InputError naming the file when it has no steps (and !whole_file_step) or no events.
RankTimeline build_rank_timeline(const TraceFile& trace, std::int64_t fallback_rank, const TimelineOptions& options);

}  // namespace prefetchlab::core
