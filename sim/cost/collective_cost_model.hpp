#pragma once
// How long one NCCL collective takes on the device, from its kind, size and group. The
// simulator asks only this interface, so models are swappable (as in SimGrid's network models):
// RingCostModel (ring_cost_model.hpp: ring/Simple only) and NcclTunerCostModel
// (nccl_tuner_cost_model.hpp: NCCL's tuner with protocol, algorithm and channel choice).
#include <cstdint>
#include <memory>
#include <optional>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };

// nccl-tests' names: "all_gather", "reduce_scatter", "all_reduce".
const char* collective_kind_name(CollectiveKind kind);

struct CollectiveShape {
  CollectiveKind kind = CollectiveKind::kAllGather;
  // nccl-tests' size column: the full gathered buffer for all-gather, the full input for
  // reduce-scatter (both n x the per-rank shard), the buffer for all-reduce.
  std::int64_t bytes = 0;
  int ranks = 1;  // communicator size
  int nodes = 1;  // ranks are spread evenly over this many nodes
};

class CollectiveCostModel {
 public:
  virtual ~CollectiveCostModel() = default;
  // Device time of the collective from its start (every rank has reached it) to its end.
  // A one-rank group costs 0. Throws std::invalid_argument on a shape that cannot exist
  // (bytes < 0, ranks < 1, nodes < 1 or not dividing ranks, more nodes than the profile has).
  virtual TimeNs duration_ns(const CollectiveShape& shape) const = 0;
};

// The model the simulator uses for this hardware and calibration: NcclTunerCostModel, or
// RingCostModel when calibration.collective_model is kRing.
// Rejects shapes no model can time (std::invalid_argument naming the shape): negative sizes,
// empty groups, ranks not spread evenly over nodes or more than a node holds, several nodes
// without a network.
void check_collective_shape(const CollectiveShape& shape, int gpus_per_node, bool has_network);

// The calibration's measured curve for this shape's op and group, if it has one
// (core/hardware/measured_collective_curve.hpp): its time at the shape's size, rounded to ns.
// Both models answer with it where it applies; a one-rank group still costs 0.
std::optional<TimeNs> measured_duration_ns(const core::CalibrationConstants& calibration,
                                           const CollectiveShape& shape);

std::unique_ptr<CollectiveCostModel> make_collective_cost_model(
    const core::HardwareProfile& profile, const core::CalibrationConstants& calibration);

}  // namespace prefetchlab::sim
