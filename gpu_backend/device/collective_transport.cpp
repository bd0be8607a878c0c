#include "gpu_backend/device/collective_transport.hpp"

#include <sstream>

namespace prefetchlab::gpu::host {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllReduce: return "all_reduce";
  }
  return "?";
}

std::string CollectiveCall::describe() const {
  std::ostringstream out;
  out << collective_kind_name(kind) << " #" << seq << " (" << send.bytes << " bytes " << element_type_name(type);
  if (kind != CollectiveKind::kAllGather) out << (op == ReduceOp::kSum ? " sum" : " max");
  out << ")";
  return out.str();
}

}  // namespace prefetchlab::gpu::host
