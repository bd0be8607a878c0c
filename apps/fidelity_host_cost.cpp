#include "fidelity_host_cost.hpp"

#include <algorithm>

#include "core/model/model_spec.hpp"
#include "sim/compute_model.hpp"
#include "sim/nccl_tuner_cost_model.hpp"

namespace prefetchlab::apps {

double simulated_host_us(const core::HardwareProfile& profile, const core::CalibrationConstants& calibration,
                         const HostQuery& query) {
  // One torch.distributed call as the host-cost model prices it (sim/host_cost_model.hpp): an
  // all-gather is one all_gather_coalesced call over one tensor; an all-reduce or a
  // reduce-scatter is one gradient reduce-scatter call's framework cost. Both per-call levels are
  // set from these very measurements (core/hardware/calibration.hpp), so the host cases check
  // that calibration holds, not an independent prediction.
  const sim::ComputeModel compute(profile, calibration, core::DType::kBF16);
  const double host_ns = static_cast<double>(
      query.op == core::NcclTestsOp::kAllGather ? compute.host().all_gather_ns(1) : compute.host().reduce_scatter_ns(0));
  if (query.timing == HostQuery::Timing::kHostOnly) return host_ns / 1e3;
  const auto kind = query.op == core::NcclTestsOp::kAllGather       ? sim::CollectiveKind::kAllGather
                    : query.op == core::NcclTestsOp::kReduceScatter ? sim::CollectiveKind::kReduceScatter
                                                                    : sim::CollectiveKind::kAllReduce;
  const std::int64_t bytes =
      query.op == core::NcclTestsOp::kAllReduce ? query.bytes_per_rank : query.bytes_per_rank * query.ranks;
  const sim::NcclTunerCostModel model(profile, calibration);
  const double device_ns = static_cast<double>(model.choose({kind, bytes, query.ranks, query.nodes}).duration_ns);
  // A pipelined loop overlaps the host's next call with the device's last collective.
  const double ns = query.timing == HostQuery::Timing::kPipelined ? std::max(host_ns, device_ns) : host_ns + device_ns;
  return ns / 1e3;
}

}  // namespace prefetchlab::apps
