#pragma once
// Which collective an event is, from whichever name the trace gives it: an NCCL/RCCL kernel
// (`ncclKernel_AllReduce_RING_LL_Sum_float(...)`, `ncclDevKernel_AllGather_RING_LL(...)`), a gloo
// work item (`gloo:all_gather`), a host call (`c10d::_allgather_base_`, `nccl:_all_gather_base`,
// `record_param_comms`) or the metadata's "Collective name" (`_allgather_base`). Names are
// classified by their letters, not looked up in a fixed list, so names of new NCCL versions
// still land in the right kind (peers broke on unlisted names: chakra issues #37, #92).
#include <string>
#include <string_view>

namespace prefetchlab::core {

enum class CollectiveKind {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv,
  kGather,
  kScatter,
  kBarrier,
  kOther,  // a collective whose operation the name does not tell
};

// "all_gather", "reduce_scatter", ... (the names used in the summary and the simulator).
const char* collective_kind_name(CollectiveKind kind);

// The operation named by a collective's name, ignoring case, underscores, "_base", "_coalesced",
// "_into_tensor": "_allgather_base" and "AllGather" and "all_gather_into_tensor" are all
// all_gather.
CollectiveKind collective_kind_from_operation(std::string_view operation);

// An NCCL / RCCL kernel name -> true and its kind; false for any other kernel.
bool nccl_kernel_kind(std::string_view kernel_name, CollectiveKind* kind);
// `gloo:all_gather` (a gloo work item, the transfer itself) -> true and its kind.
bool gloo_work_kind(std::string_view name, CollectiveKind* kind);
// A host-side collective call: `c10d::allreduce_`, `record_param_comms`, `nccl:all_reduce`.
// `record_param_comms` has no operation in its name: kind is kOther then (its args tell).
bool collective_call_kind(std::string_view name, CollectiveKind* kind);

}  // namespace prefetchlab::core
