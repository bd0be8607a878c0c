#include "fidelity_host_cost.hpp"

#include <algorithm>

#include "core/model/model_spec.hpp"
#include "sim/cost/compute_model.hpp"
#include "sim/cost/nccl_tuner_cost_model.hpp"

namespace prefetchlab::apps {

double simulated_host_us(const core::HardwareProfile& profile, const core::CalibrationConstants& calibration,
                         const HostQuery& query) {
  // One torch.distributed call as the host-cost model prices it (sim/cost/host_cost_model.hpp): an
  // all-gather is one all_gather_coalesced call over one tensor; a reduce-scatter is one gradient
  // reduce-scatter call's framework cost; an all-reduce is the in-place all_reduce call. Those
  // levels come from measurements of this corpus (core/hardware/calibration.hpp says which), so
  // those cases check that the calibration holds, not an independent prediction.
  const sim::ComputeModel compute(profile, calibration, core::DType::kBF16);
  const auto& host = compute.host();
  const double host_ns = static_cast<double>(query.op == core::NcclTestsOp::kAllGather       ? host.all_gather_ns(1)
                                             : query.op == core::NcclTestsOp::kReduceScatter ? host.reduce_scatter_ns(0)
                                                                                             : host.all_reduce_call_ns());
  if (query.timing == HostQuery::Timing::kHostOnly) return host_ns / 1e3;
  const auto kind = query.op == core::NcclTestsOp::kAllGather       ? sim::CollectiveKind::kAllGather
                    : query.op == core::NcclTestsOp::kReduceScatter ? sim::CollectiveKind::kReduceScatter
                                                                    : sim::CollectiveKind::kAllReduce;
  const std::int64_t bytes =
      query.op == core::NcclTestsOp::kAllReduce ? query.bytes_per_rank : query.bytes_per_rank * query.ranks;
  const sim::NcclTunerCostModel model(profile, calibration);
  const double device_ns = static_cast<double>(model.choose({kind, bytes, query.ranks, query.nodes}).duration_ns);
  // A pipelined loop overlaps the host's next call with the device's last collective.
  double ns = query.timing == HostQuery::Timing::kPipelined ? std::max(host_ns, device_ns) : host_ns + device_ns;
  if (query.barrier_per_call) {
    // torch.distributed.barrier() on NCCL: an all_reduce of one element, waited for
    // (ProcessGroupNCCL::barrier in pytorch/pytorch torch/csrc/distributed/c10d).
    constexpr std::int64_t kBarrierBytes = 4;
    ns += static_cast<double>(host.all_reduce_call_ns()) +
          static_cast<double>(
              model.choose({sim::CollectiveKind::kAllReduce, kBarrierBytes, query.ranks, query.nodes}).duration_ns);
  }
  return ns / 1e3;
}

}  // namespace prefetchlab::apps
