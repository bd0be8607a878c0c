#include "sim/cost/collective_cost_model.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/cost/nccl_tuner_cost_model.hpp"
#include "sim/cost/ring_cost_model.hpp"

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

void check_collective_shape(const CollectiveShape& shape, int gpus_per_node, bool has_network) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument(std::string(collective_kind_name(shape.kind)) + " of " +
                                std::to_string(shape.bytes) + " bytes on " + std::to_string(shape.ranks) +
                                " ranks / " + std::to_string(shape.nodes) + " nodes: " + why);
  };
  if (shape.bytes < 0) bad("negative size");
  if (shape.ranks < 1 || shape.nodes < 1) bad("a group needs at least one rank and one node");
  if (shape.ranks % shape.nodes != 0) bad("ranks must spread evenly over nodes");
  if (shape.ranks / shape.nodes > gpus_per_node) bad("more ranks per node than GPUs per node");
  if (shape.nodes > 1 && !has_network) bad("the profile has no network");
}

std::optional<TimeNs> measured_duration_ns(const core::CalibrationConstants& calibration,
                                           const CollectiveShape& shape) {
  if (shape.ranks < 2 || calibration.measured_collectives.empty()) return std::nullopt;
  const core::NcclTestsOp op = shape.kind == CollectiveKind::kAllGather       ? core::NcclTestsOp::kAllGather
                               : shape.kind == CollectiveKind::kReduceScatter ? core::NcclTestsOp::kReduceScatter
                                                                              : core::NcclTestsOp::kAllReduce;
  const core::MeasuredCollectiveCurve* curve =
      core::find_measured_curve(calibration.measured_collectives, op, shape.ranks, shape.nodes);
  if (!curve) return std::nullopt;
  return static_cast<TimeNs>(std::llround(curve->time_us(shape.bytes) * 1e3));
}

std::unique_ptr<CollectiveCostModel> make_collective_cost_model(
    const core::HardwareProfile& profile, const core::CalibrationConstants& calibration) {
  if (calibration.collective_model == core::CalibrationConstants::CollectiveModel::kRing) {
    return std::make_unique<RingCostModel>(profile, calibration);
  }
  return std::make_unique<NcclTunerCostModel>(profile, calibration);
}

}  // namespace prefetchlab::sim
