#include "collective_cost_model.hpp"

#include "nccl_tuner_cost_model.hpp"
#include "ring_cost_model.hpp"

namespace prefetchlab::sim {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
  }
  return "unknown";
}

std::unique_ptr<CollectiveCostModel> make_collective_cost_model(
    const core::HardwareProfile& profile, const core::CalibrationConstants& calibration) {
  if (calibration.collective_model == core::CalibrationConstants::CollectiveModel::kRing) {
    return std::make_unique<RingCostModel>(profile, calibration);
  }
  return std::make_unique<NcclTunerCostModel>(profile, calibration);
}

}  // namespace prefetchlab::sim
