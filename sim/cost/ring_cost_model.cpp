#include "sim/cost/ring_cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <variant>

#include "core/hardware/hardware_derived.hpp"

namespace prefetchlab::sim {
namespace {

// --- Latency: NCCL src/graph/tuning.cc ncclTunerConstantsDefaults, Ring row, Simple column,
// in ns. Single node: base + nsteps * per-hop, nsteps = n-1 for AG/RS and 2(n-1)
// for AR; the hop class is NVLink when the ring's intra links are NVLink, else PCI. This gives
// (derived): 2/4/8 ranks 11.8/18.6/32.2 us (NVLink), 14.1/25.5/48.3 us (PCI).
constexpr TimeNs kBaseNs = 8'400;
constexpr TimeNs kNvlinkHopNs = 3'400;
constexpr TimeNs kPciHopNs = 5'700;
// Multi-node (tuning.cc): base + (nsteps - nInterSteps) * max(intraHop, netOverhead)
// + nInterSteps * interLat, nInterSteps = nodes-1 for AG/RS and 2(nodes-1) for AR.
// interLat = NET Ring Simple per-hop 14.0 us + 2 x graph latencyInter (the Simple "flush"
// term). latencyInter comes from the NIC plugin's properties at run time; no value is
// known offline, so it is taken as 0 here. With one GPU per node NCCL uses the Tree NET latency,
// which for Simple is also 14.0 us.
constexpr TimeNs kNetHopNs = 14'000;
// netOverhead: 1.0 us on Intel x86 and other CPUs, 2.0 us on AMD x86, x3 for Simple. Profiles
// do not name the host CPU, so the Intel/other value is used.
constexpr TimeNs kNetOverheadNs = 3'000;
// Multi-node ring all-reduce with Simple: latency x1.4 on Ampere and later (1.9 before) once
// nBytes / (nChannels * nRanks) >= 64 (the "plateau effect" of tuning.cc). Channel counts are
// not modelled; NCCL shrinks them for small messages down to its minimum of 2 (sjeaugey,
// NVIDIA/nccl #689), so the test uses 2 channels.
constexpr double kAllReducePlateauFactor = 1.4;
constexpr std::int64_t kPlateauBytesPerChannelRank = 64;
constexpr std::int64_t kMinChannels = 2;

// --- Bandwidth (measured large-message ring busBW).
// NVLink: ~80% of the unidirectional line rate: 8x H200 all_gather 361.4 GB/s of 450
// (stas00/ml-engineering network/README.md), 8x H100 ~360 (NVIDIA/nccl-tests #326), 8x A100
// all_reduce 235 of 300 (stas00/ml-engineering); 0.8 x 900 = 720 on
// B200 against a measured 682 all_reduce.
constexpr double kNvlinkRingEfficiency = 0.8;
// PCIe with peer-to-peer: ~80% of the Gen4 rate for P2P copies (RTX A6000 26.3 GB/s of 31.5,
// NVIDIA/nvbandwidth #50); so an estimated 20-24 GB/s for ring AG/RS on two Gen4 GPUs (NCCL's
// topo.cc models the link at 24), and 8-GPU Gen5 boxes reach less (37.6-41.7 GB/s all_reduce on
// 63, voipmonitor/rtx6kpro hardware/pcie-bandwidth.md) - calibrate those.
constexpr double kPcieP2pRingEfficiency = 0.8;
// PCIe without peer-to-peer: NCCL stages through host memory (SHM), so every GPU's
// link carries its send (D2H) and its receive (H2D) at once, and simultaneous H2D+D2H is not
// additive: 11-16 GB/s each way on the 8x RTX 4090 Gen4 box (NVIDIA/nvbandwidth #15),
// against 24-27 one way. Half the P2P figure, 0.4 x 31.5 = 12.6 GB/s, sits in that range.
constexpr double kPcieShmRingEfficiency = 0.4;
// Network: a CX-7 400 Gb NIC achieves 48-49 of 50 GB/s (NVIDIA/nccl-tests #267), ~0.97; DGX A100
// with 8x 200 Gb reaches 192 GB/s all_reduce busBW across nodes (NVIDIA/nccl #812), i.e. 0.96 of
// the node's 200 GB/s of NICs.
constexpr double kNicEfficiency = 0.97;

std::int64_t steps(CollectiveKind kind, std::int64_t parties) {
  return kind == CollectiveKind::kAllReduce ? 2 * (parties - 1) : parties - 1;
}

TimeNs seconds_to_ns(double seconds) {
  const double ns = std::round(seconds * 1e9);
  // A collective longer than ~100 years is a unit mistake somewhere upstream.
  if (!(ns < 4e18)) throw std::overflow_error("collective duration does not fit in int64 ns");
  return static_cast<TimeNs>(ns);
}

}  // namespace

RingCostModel::RingCostModel(const core::HardwareProfile& profile,
                             const core::CalibrationConstants& calibration)
    : gpus_per_node_(profile.gpus_per_node), calibration_(calibration) {
  const double link = core::intra_node_unidirectional_bytes_per_s(profile);
  if (std::holds_alternative<core::NvlinkLink>(profile.intra_node_link)) {
    nvlink_ = true;
    intra_node_bus_bytes_per_s_ = kNvlinkRingEfficiency * link;
  } else {
    const bool p2p = std::get<core::PcieLink>(profile.intra_node_link).peer_to_peer;
    intra_node_bus_bytes_per_s_ = (p2p ? kPcieP2pRingEfficiency : kPcieShmRingEfficiency) * link;
  }
  network_bytes_per_s_per_gpu_ = core::network_bytes_per_s_per_gpu(profile).value_or(0);
}

void RingCostModel::check(const CollectiveShape& shape) const {
  check_collective_shape(shape, gpus_per_node_, network_bytes_per_s_per_gpu_ > 0);
}

double RingCostModel::derived_bus_bandwidth_bytes_per_s(int ranks, int nodes) const {
  if (nodes <= 1) return intra_node_bus_bytes_per_s_;
  // Across nodes NCCL runs rings over every NIC in parallel, so what enters a node over the network
  // is bounded by the NICs its ranks use: the per-GPU NIC share times the ranks on the node (one
  // NIC per GPU on the bundled clusters), at kNicEfficiency. Each node receives (nodes-1)/nodes * S
  // over the network while each rank receives (n-1)/n * S, so as busBW the bound is about that NIC
  // total itself - matching 192 GB/s all_reduce on DGX A100 with 8x 200 Gb (NVIDIA/nccl #812) and
  // 377 GB/s on 4 nodes of 8x B200 with 8x 400 Gb (stas00/ml-engineering network/README.md). One
  // GPU's NIC share alone would be 8x below those measurements.
  const int ranks_per_node = ranks / nodes;
  const double network = network_bytes_per_s_per_gpu_ * ranks_per_node * kNicEfficiency;
  return std::min(intra_node_bus_bytes_per_s_, network);
}

double RingCostModel::bus_bandwidth_bytes_per_s(CollectiveKind phase, int ranks, int nodes) const {
  const auto& override_bw = phase == CollectiveKind::kReduceScatter
                                ? calibration_.reduce_scatter_bus_bandwidth_bytes_per_s
                                : calibration_.allgather_bus_bandwidth_bytes_per_s;
  return override_bw ? *override_bw : derived_bus_bandwidth_bytes_per_s(ranks, nodes);
}

TimeNs RingCostModel::derived_latency_ns(const CollectiveShape& shape) const {
  check(shape);
  if (shape.ranks == 1) return 0;
  const TimeNs intra_hop_ns = nvlink_ ? kNvlinkHopNs : kPciHopNs;
  const std::int64_t total_steps = steps(shape.kind, shape.ranks);
  if (shape.nodes == 1) return kBaseNs + total_steps * intra_hop_ns;
  const std::int64_t inter_steps = steps(shape.kind, shape.nodes);
  const TimeNs latency = kBaseNs +
                         (total_steps - inter_steps) * std::max(intra_hop_ns, kNetOverheadNs) +
                         inter_steps * kNetHopNs;
  const bool plateau = shape.kind == CollectiveKind::kAllReduce &&
                       shape.bytes / (kMinChannels * shape.ranks) >= kPlateauBytesPerChannelRank;
  return plateau ? std::llround(static_cast<double>(latency) * kAllReducePlateauFactor) : latency;
}

TimeNs RingCostModel::latency_ns(const CollectiveShape& shape) const {
  check(shape);
  if (shape.ranks == 1) return 0;
  if (calibration_.collective_latency_ns) return *calibration_.collective_latency_ns;
  return derived_latency_ns(shape);
}

TimeNs RingCostModel::duration_ns(const CollectiveShape& shape) const {
  const TimeNs latency = latency_ns(shape);  // checks the shape
  if (shape.ranks == 1) return 0;
  if (const auto measured = measured_duration_ns(calibration_, shape)) return *measured;
  const double n = shape.ranks;
  const double per_phase_bytes = (n - 1) / n * static_cast<double>(shape.bytes);
  double seconds = 0;
  if (shape.kind != CollectiveKind::kAllGather) {  // reduce-scatter, or all-reduce's first half
    seconds += per_phase_bytes /
               bus_bandwidth_bytes_per_s(CollectiveKind::kReduceScatter, shape.ranks, shape.nodes);
  }
  if (shape.kind != CollectiveKind::kReduceScatter) {  // all-gather, or all-reduce's second half
    seconds += per_phase_bytes /
               bus_bandwidth_bytes_per_s(CollectiveKind::kAllGather, shape.ranks, shape.nodes);
  }
  return latency + seconds_to_ns(seconds);
}

}  // namespace prefetchlab::sim
