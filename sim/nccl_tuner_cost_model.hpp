#pragma once
// The collective cost model that follows NCCL's own tuner (NVIDIA/nccl 2.30 master:
// src/graph/tuning.cc, search.cc, topo.cc, topo.h and src/enqueue.cc). For every call it evaluates
// each algorithm/protocol NCCL would consider and keeps the one with the lowest predicted time, as
// NCCL does:
//   ring all-gather / reduce-scatter:  t = lat(p) + (n-1)/n * S / busBW(p)
//   ring all-reduce (RS then AG):      t = lat(p) + (n-1)/n * S / busBW_rs(p) + (same for AG)
//   NVLS (NVSwitch, Hopper+, one node, Simple only): lat = 25 us, busBW from the NVLink total
// with lat(p) from NCCL's base and per-hop latency constants (NVLink / PCI / NET hop classes,
// two tiers across nodes) and busBW(p) from the ring graph NCCL's search would build on the
// profile's links (channels x per-channel speed), LL and LL128 derived from Simple
// (LL: half and capped per GPU generation; LL128: 120/128 and a per-channel cap, NVLink only).
// NCCL then runs a call on fewer channels when the message is small (enqueue.cc); the model
// charges the bandwidth term at the fraction of channels in use.
//
// Calibration: a measured collective_latency_us replaces every latency; measured bus
// bandwidths replace the Simple ring figure (LL and LL128 follow from it) and switch NVLS off,
// since they describe the collective as it ran.
#include <optional>
#include <string>
#include <vector>

#include "collective_cost_model.hpp"

namespace prefetchlab::sim {

enum class NcclAlgorithm { kRing, kNvls };
enum class NcclProtocol { kLL, kLL128, kSimple };
// NCCL's spellings in its INFO lines: "RING", "NVLS"; "LL", "LL128", "SIMPLE".
const char* nccl_algorithm_name(NcclAlgorithm algorithm);
const char* nccl_protocol_name(NcclProtocol protocol);

// Which algorithms `choose` may use: kAuto = every one NCCL would consider here.
enum class AlgorithmFilter { kAuto, kRing, kNvls };

// The tuner's answer for one call.
struct NcclChoice {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  int channels = 0;        // channels this call runs on (fewer for small messages)
  int graph_channels = 0;  // channels of the communicator's graph for this algorithm
  TimeNs latency_ns = 0;
  // Bus bandwidth of this algorithm/protocol with all graph channels, nccl-tests' busbw units.
  double bus_bandwidth_bytes_per_s = 0;
  TimeNs tuner_ns = 0;    // NCCL's estimate: all channels (what the choice compares)
  double tuner_seconds = 0;  // the same, unrounded (ties below 1 ns are not ties)
  TimeNs duration_ns = 0; // what the model charges: the channels in use
};

class NcclTunerCostModel final : public CollectiveCostModel {
 public:
  NcclTunerCostModel(const core::HardwareProfile& profile,
                     const core::CalibrationConstants& calibration);

  TimeNs duration_ns(const CollectiveShape& shape) const override;

  // The lowest-time algorithm/protocol for this call (a one-rank group: all zeros, RING
  // SIMPLE). Throws std::invalid_argument on an impossible shape, or when `filter` asks for
  // NVLS where it does not exist (see nvls_available).
  NcclChoice choose(const CollectiveShape& shape, AlgorithmFilter filter = AlgorithmFilter::kAuto) const;
  // One algorithm/protocol; nullopt where NCCL would not use it (LL128 off the NVLink class,
  // NVLS off NVSwitch or with LL/LL128).
  std::optional<NcclChoice> evaluate(const CollectiveShape& shape, NcclAlgorithm algorithm,
                                     NcclProtocol protocol) const;
  bool nvls_available(const CollectiveShape& shape) const;

  // The ring graph: channels and per-channel speed NCCL's search settles on (derived).
  int ring_graph_channels() const { return ring_channels_; }
  double ring_channel_bytes_per_s() const { return ring_channel_bytes_per_s_; }
  // Ring Simple bus bandwidth derived from link facts (no calibration override) for a group.
  double derived_ring_bus_bandwidth_bytes_per_s(int ranks, int nodes) const;
  // NVLS bus bandwidth for this kind on one node (0 where NVLS is unavailable).
  double nvls_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const;
  // "NVLink", "PCI" or "PCI (SHM through host memory)": the hop class of the ring.
  std::string path_description() const;

 private:
  enum class Arch { kAmpere, kHopper, kBlackwell };  // NCCL's compute-capability classes
  void check(const CollectiveShape& shape) const;
  TimeNs ring_latency_ns(const CollectiveShape& shape, NcclProtocol protocol, int channels) const;
  double ring_bus_bandwidth(CollectiveKind phase, const CollectiveShape& shape,
                            NcclProtocol protocol) const;

  Arch arch_ = Arch::kAmpere;
  bool nvlink_ = false;
  bool nvswitch_ = false;
  bool shm_ = false;  // PCIe without peer-to-peer: through host memory
  int gpus_per_node_ = 0;
  double nccl_link_total_bytes_per_s_ = 0;  // one GPU's intra-node total as NCCL's topology sees it
  int ring_channels_ = 0;
  double ring_channel_bytes_per_s_ = 0;
  double network_bytes_per_s_per_gpu_ = 0;
  core::CalibrationConstants calibration_;
};

}  // namespace prefetchlab::sim
