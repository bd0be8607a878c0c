#pragma once
// The first collective cost model: NCCL's ring algorithm with the Simple protocol, as NCCL's
// own estimator writes it (NVIDIA/nccl src/graph/tuning.cc; nccl-tests doc/PERFORMANCE.md):
//   all-gather, reduce-scatter:  t = latency + (n-1)/n * S / busBW
//   all-reduce (RS then AG):     t = latency + (n-1)/n * S / busBW_rs + (n-1)/n * S / busBW_ag
// with S the nccl-tests size (CollectiveShape::bytes). The latency comes from NCCL's tuner
// constants for Ring/Simple (tuning.cc); the bus bandwidth from the profile's link facts at the
// efficiency ring collectives are measured to reach (sources in ring_cost_model.cpp). Measured
// figures in the calibration (collective_latency_ns, *_bus_bandwidth_bytes_per_s) replace the
// derived ones. Not modelled here (NcclTunerCostModel, the default, does): LL/LL128 protocols,
// NVLS, channel counts. Neither models PAT or link sharing between concurrent collectives. Selected
// with calibration collective_model: ring.
#include "sim/cost/collective_cost_model.hpp"

namespace prefetchlab::sim {

class RingCostModel final : public CollectiveCostModel {
 public:
  RingCostModel(const core::HardwareProfile& profile,
                const core::CalibrationConstants& calibration);

  TimeNs duration_ns(const CollectiveShape& shape) const override;

  // The parts of duration_ns, calibration overrides applied. Shapes are checked as there.
  TimeNs latency_ns(const CollectiveShape& shape) const;
  // The bus bandwidth of the ring phase `phase` (all-gather or reduce-scatter; an all-reduce
  // runs one of each) for this group.
  double bus_bandwidth_bytes_per_s(CollectiveKind phase, int ranks, int nodes) const;

  // What the link facts give, ignoring calibration overrides.
  TimeNs derived_latency_ns(const CollectiveShape& shape) const;
  double derived_bus_bandwidth_bytes_per_s(int ranks, int nodes) const;
  // One node's ring bus bandwidth: NVLink links x per-link x 0.8; PCIe with peer-to-peer
  // 0.8 x the link's unidirectional rate; PCIe without it (staged through host memory) 0.4 x.
  double intra_node_bus_bandwidth_bytes_per_s() const { return intra_node_bus_bytes_per_s_; }

 private:
  void check(const CollectiveShape& shape) const;

  bool nvlink_ = false;
  int gpus_per_node_ = 0;
  double intra_node_bus_bytes_per_s_ = 0;
  double network_bytes_per_s_per_gpu_ = 0;  // 0 when the profile has no network
  core::CalibrationConstants calibration_;
};

}  // namespace prefetchlab::sim
