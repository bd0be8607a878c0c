#include "core/trace_import/collective_kind.hpp"

#include <cctype>

namespace prefetchlab::core {
namespace {

// Lower-case letters only: "_all_gather_base" -> "allgatherbase".
std::string letters(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kSendRecv: return "send_recv";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kOther: return "other";
  }
  return "other";
}

CollectiveKind collective_kind_from_operation(std::string_view operation) {
  const std::string l = letters(operation);
  // Order matters: "allgather" before "gather", "reducescatter" before "reduce" and "scatter".
  if (l.find("allgather") != std::string::npos) return CollectiveKind::kAllGather;
  if (l.find("reducescatter") != std::string::npos) return CollectiveKind::kReduceScatter;
  if (l.find("allreduce") != std::string::npos) return CollectiveKind::kAllReduce;
  if (l.find("alltoall") != std::string::npos) return CollectiveKind::kAllToAll;
  if (l.find("broadcast") != std::string::npos) return CollectiveKind::kBroadcast;
  if (l.find("sendrecv") != std::string::npos || l == "send" || l == "recv" || starts_with(l, "send") ||
      starts_with(l, "recv")) {
    return CollectiveKind::kSendRecv;
  }
  if (l.find("barrier") != std::string::npos) return CollectiveKind::kBarrier;
  if (l.find("reduce") != std::string::npos) return CollectiveKind::kReduce;
  if (l.find("gather") != std::string::npos) return CollectiveKind::kGather;
  if (l.find("scatter") != std::string::npos) return CollectiveKind::kScatter;
  return CollectiveKind::kOther;
}

bool nccl_kernel_kind(std::string_view kernel_name, CollectiveKind* kind) {
  // ncclKernel_<Op>_..., ncclDevKernel_<Op>_..., rcclKernel..., and the generic entry points
  // (ncclDevKernel_Generic, ncclKernel_Generic) whose op is only in the metadata.
  for (const std::string_view prefix : {"ncclDevKernel_", "ncclKernel_", "rcclDevKernel_", "rcclKernel_"}) {
    if (!starts_with(kernel_name, prefix)) continue;
    std::string_view rest = kernel_name.substr(prefix.size());
    const std::size_t end = rest.find_first_of("_(<");
    *kind = collective_kind_from_operation(rest.substr(0, end));
    return true;
  }
  return false;
}

bool gloo_work_kind(std::string_view name, CollectiveKind* kind) {
  if (!starts_with(name, "gloo:")) return false;
  *kind = collective_kind_from_operation(name.substr(5));
  return true;
}

bool collective_call_kind(std::string_view name, CollectiveKind* kind) {
  if (name == "record_param_comms") {
    *kind = CollectiveKind::kOther;
    return true;
  }
  for (const std::string_view prefix : {"c10d::", "nccl:", "rccl:"}) {
    if (!starts_with(name, prefix)) continue;
    *kind = collective_kind_from_operation(name.substr(prefix.size()));
    // c10d:: also names non-collective helpers (c10d::wait? none today); keep only collectives.
    return *kind != CollectiveKind::kOther;
  }
  return false;
}

}  // namespace prefetchlab::core
