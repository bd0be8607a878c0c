#pragma once
// The executor's record of every place a rank's host blocked on its device. DeepSpeed's host
// blocks only at a few places inside an iteration; each entry carries the one it is, so a test
// can show there is no other (issue 7, "Done when" 4).
#include <cstdint>
#include <string>

namespace prefetchlab::gpu {

enum class SyncTag {
  // Inside an iteration, where DeepSpeed's host blocks (files of deepspeed/runtime/zero/ in
  // deepspeedai/DeepSpeed, "coordinator" = partitioned_param_coordinator.py; the controller's
  // two in the follow-up commit 0z5a/DeepSpeed 6e70233):
  kFetchThrottle,       // coordinator: > 2 outstanding fetch events -> synchronize the oldest
  kReduceThrottle,      // stage3.py: > 2 outstanding reduce events -> synchronize the oldest
  kEndOfBackward,       // stage3.py: reduce_and_partition_stream.synchronize() after the last flush
  kTraceCheck,          // coordinator: assert_ints_same_as_other_ranks at a non-COMPLETE reset_step
  kPersistentRegather,  // stage3.py _post_step: the blocking persistent re-gather after the step
  // World size 1 only: NoGather(Coalesced)Handle.wait runs current_stream().synchronize() on
  // its first wait (deepspeed/runtime/zero/partition_parameters.py: one partition ⇒ no-gather
  // handle).
  kNoGatherWait,
  kControllerSamples,   // 6e70233: the follow-up reads last iteration's fetch events at reset_step
  kAgreement,           // 6e70233: .item() on the controller's all-reduce MAX
  kAllocatorRetry,      // the caching allocator's out-of-memory retry (cudaDeviceSynchronize)
  // Outside iterations (not DeepSpeed's training loop):
  kSetup,               // parameters uploaded, model states ready
  kRunEnd,              // every stream done; events read into metrics
  kInspection,          // a test or tool read device memory
};

constexpr const char* sync_tag_name(SyncTag tag) {
  switch (tag) {
    case SyncTag::kFetchThrottle: return "fetch_throttle";
    case SyncTag::kReduceThrottle: return "reduce_throttle";
    case SyncTag::kEndOfBackward: return "end_of_backward";
    case SyncTag::kTraceCheck: return "trace_check";
    case SyncTag::kPersistentRegather: return "persistent_regather";
    case SyncTag::kNoGatherWait: return "no_gather_wait";
    case SyncTag::kControllerSamples: return "controller_samples";
    case SyncTag::kAgreement: return "agreement";
    case SyncTag::kAllocatorRetry: return "allocator_retry";
    case SyncTag::kSetup: return "setup";
    case SyncTag::kRunEnd: return "run_end";
    case SyncTag::kInspection: return "inspection";
  }
  return "?";
}

// True for the synchronisations DeepSpeed (or PyTorch under it) performs inside an iteration.
constexpr bool is_deepspeed_sync(SyncTag tag) {
  return tag != SyncTag::kSetup && tag != SyncTag::kRunEnd && tag != SyncTag::kInspection;
}

struct CallLogEntry {
  int rank = 0;
  int iteration = 0;  // 0 = outside any iteration (before the first, after the last)
  SyncTag tag = SyncTag::kSetup;
  std::int64_t host_blocked_ns = 0;
};

}  // namespace prefetchlab::gpu
