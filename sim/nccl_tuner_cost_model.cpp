#include "nccl_tuner_cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>

#include "core/hardware/hardware_derived.hpp"

namespace prefetchlab::sim {
namespace {

constexpr double kGB = 1e9;
constexpr double kNsPerUs = 1e3;
constexpr int kProtocols = 3;  // LL, LL128, Simple: NCCL's order

int index(NcclProtocol p) { return static_cast<int>(p); }

// --- Latency constants, us (NVIDIA/nccl src/graph/tuning.cc ncclTunerConstantsDefaults) -----
constexpr std::array<double, kProtocols> kRingBaseUs{6.6, 14.0, 8.4};
constexpr std::array<double, kProtocols> kRingNvlinkHopUs{0.6, 1.9, 3.4};
constexpr std::array<double, kProtocols> kRingPciHopUs{1.0, 2.5, 5.7};
constexpr std::array<double, kProtocols> kRingNetHopUs{2.7, 4.0, 14.0};
// With one GPU per node NCCL takes the Tree NET latency for the inter-node steps.
constexpr std::array<double, kProtocols> kTreeNetHopUs{5.0, 8.5, 14.0};
// netOverhead: 1.0 us on Intel x86 and other CPUs (2.0 on AMD; profiles do not name the CPU),
// x3 for Simple. The graph's latencyInter (NIC plugin property, known at run time) is taken as 0.
constexpr double kNetOverheadUs = 1.0;
constexpr double kSimpleNetOverheadFactor = 3.0;
// Multi-node ring all-reduce with Simple on Ampere and later: latency x1.4 once
// nBytes / (nChannels * nRanks) >= 64 (the "plateau effect").
constexpr double kAllReducePlateauFactor = 1.4;
constexpr double kPlateauBytesPerChannelRank = 64;
// NVLS: the NVLink NVLS hardware latency replaces the base (no base added).
constexpr double kNvlsLatencyUs = 25.0;
// PCIe without peer-to-peer: NCCL's SHM transport stages every ring step through host memory.
// Not a tuner constant (the tuner charges the PCI class); an estimate from 8x RTX 4090
// all_reduce of 8 B takes 40-42 us (NVIDIA/nccl #1530) where the PCI LL constants give
// 6.6 + 14 x 1.0 = 20.6 us, i.e. ~1.5 us more per step. Applied to every protocol.
constexpr double kShmExtraHopUs = 1.5;

// --- Bandwidth (NVIDIA/nccl src/graph/topo.h, topo.cc, search.cc, tuning.cc) -------------
// Per-NVLink-link speed NCCL's topology assigns, GB/s: SM80 20.0, SM90 20.6, SM100 40.1.
constexpr double kNvlinkAmpereGBps = 20.0;
constexpr double kNvlinkHopperGBps = 20.6;
constexpr double kNvlinkBlackwellGBps = 40.1;
// PCIe: width x per-lane rate / 80 with 60/120/240/480 for Gen3..6 (topo.cc kvDictPciGen):
// x16 Gen3 12, Gen4 24, Gen5 48, Gen6 96 GB/s.
double nccl_pcie_gbps(int generation, int lanes) {
  const double per_lane = 60.0 * std::pow(2.0, generation - 3);
  return lanes * per_lane / 80.0;
}
// Through host memory every GPU's link carries its send (D2H) and its receive (H2D) at once,
// and simultaneous H2D + D2H is not additive: 11-16 GB/s each way against 24-27 one way on the
// 8x RTX 4090 Gen4 box (NVIDIA/nvbandwidth #15). Half the link: an estimate.
constexpr double kShmLinkFraction = 0.5;
// Per-channel ring speeds the search tries (GB/s), by generation.
constexpr std::array<double, 13> kSpeedsAmpere{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 11> kSpeedsHopper{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 12> kSpeedsBlackwell{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
// Search bounds: at most MAXCHANNELS/2 rings, at least 2 (sjeaugey, NVIDIA/nccl #689).
constexpr int kMaxSearchChannels = 32;
constexpr int kMinChannels = 2;
// NCCL duplicates fast rings (search.cc: bwIntra >= 25 GB/s -> twice the channels, each half
// the speed); it changes the channel count, not the total. Our reading of search.cc.
constexpr double kDuplicateAboveGBps = 25.0;
constexpr int kMaxChannels = 64;  // MAXCHANNELS
// LL: min(llMaxBw, 0.5 x busBW); llMaxBw single node Ampere 87.7, Hopper 141, Blackwell 282.
constexpr double kLlFraction = 0.5;
constexpr std::array<double, 3> kLlMaxGBps{87.7, 141.0, 282.0};
// LL128: min(0.92 x busBW, nChannels x per-channel cap); caps Ampere 20, Hopper 36.7, Blackwell 40.
constexpr double kLl128Fraction = 0.92;
constexpr std::array<double, 3> kLl128PerChannelGBps{20.0, 36.7, 40.0};
// NVLS: bw = NVLink total x efficiency x (nCh-1)/nCh; efficiency Hopper 0.85, Blackwell 0.74;
// nvlsChannels 16 on SM90, 24 on SM100 in one NVLink domain (nvls.cc).
constexpr std::array<double, 3> kNvlsEfficiency{0.0, 0.85, 0.74};
constexpr std::array<int, 3> kNvlsChannels{0, 16, 24};
constexpr int kMaxNvlsRanks = 32;  // NCCL_MAX_NVLS_ARITY
// Network: a CX-7 400 Gb NIC achieves 48-49 of 50 GB/s (nccl-tests #267); DGX A100 reaches
// 192 GB/s across nodes with 8x 200 Gb (NVIDIA/nccl #812).
constexpr double kNicEfficiency = 0.97;

// Channels in use (enqueue.cc topoGetAlgoInfo): drop channels while
// nBytes < nChannels * nThreads * threshold. Threads and per-thread thresholds (comm.h):
// Simple 512 x 64 B, LL128 640 x 8 B, LL 512 x 8 B x nRanks (ring LL).
double channel_unit_bytes(NcclProtocol p, int ranks) {
  switch (p) {
    case NcclProtocol::kSimple:
      return 512.0 * 64.0;
    case NcclProtocol::kLL128:
      return 640.0 * 8.0;
    case NcclProtocol::kLL:
      return 512.0 * 8.0 * ranks;
  }
  return 1;
}

std::int64_t ring_steps(CollectiveKind kind, std::int64_t parties) {
  return kind == CollectiveKind::kAllReduce ? 2 * (parties - 1) : parties - 1;
}

TimeNs seconds_to_ns(double seconds) {
  const double ns = std::round(seconds * 1e9);
  if (!(ns < 4e18)) throw std::overflow_error("collective duration does not fit in int64 ns");
  return static_cast<TimeNs>(ns);
}

TimeNs us_to_ns(double us) { return std::llround(us * kNsPerUs); }

struct RingGraph {
  int channels = 0;
  double channel_gbps = 0;
};

// The search keeps the solution with the highest nChannels x speed (ncclTopoCompareGraphs),
// trying speeds from the fastest down; a ring at speed s takes s of every GPU's link total.
RingGraph search_ring(double total_gbps, std::span<const double> speeds) {
  RingGraph best;
  for (int min_channels : {kMinChannels, 1}) {
    for (const double s : speeds) {
      if (s > total_gbps) continue;
      const int n = std::min(static_cast<int>(std::floor(total_gbps / s + 1e-9)), kMaxSearchChannels);
      if (n < min_channels) continue;
      if (n * s > best.channels * best.channel_gbps + 1e-9) best = {n, s};
    }
    if (best.channels > 0) break;
  }
  if (best.channels == 0) best = {1, total_gbps};  // slower than every listed speed
  if (best.channel_gbps >= kDuplicateAboveGBps) {
    const int doubled = std::min(2 * best.channels, kMaxChannels);
    best.channel_gbps = best.channel_gbps * best.channels / doubled;
    best.channels = doubled;
  }
  return best;
}

}  // namespace

const char* nccl_algorithm_name(NcclAlgorithm algorithm) {
  return algorithm == NcclAlgorithm::kNvls ? "NVLS" : "RING";
}

const char* nccl_protocol_name(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "SIMPLE";
  }
  return "?";
}

NcclTunerCostModel::NcclTunerCostModel(const core::HardwareProfile& profile,
                                       const core::CalibrationConstants& calibration)
    : gpus_per_node_(profile.gpus_per_node), calibration_(calibration) {
  const std::string& gpu = profile.gpu.model;
  const auto has = [&](const char* s) { return gpu.find(s) != std::string::npos; };
  if (const auto* nv = std::get_if<core::NvlinkLink>(&profile.intra_node_link)) {
    nvlink_ = true;
    nvswitch_ = nv->nvswitch;
    if (nv->generation >= 5 || has("B200") || has("B300")) {
      arch_ = Arch::kBlackwell;
    } else if (nv->generation == 4 || has("H100") || has("H200") || has("H800") || has("H20")) {
      arch_ = Arch::kHopper;
    }
    const double per_link = arch_ == Arch::kBlackwell ? kNvlinkBlackwellGBps
                            : arch_ == Arch::kHopper  ? kNvlinkHopperGBps
                                                      : kNvlinkAmpereGBps;
    nccl_link_total_bytes_per_s_ = nv->links_per_gpu * per_link * kGB;
  } else {
    const auto& pcie = std::get<core::PcieLink>(profile.intra_node_link);
    if (has("H100") || has("H200")) arch_ = Arch::kHopper;
    shm_ = !pcie.peer_to_peer;
    nccl_link_total_bytes_per_s_ =
        nccl_pcie_gbps(pcie.generation, pcie.lanes) * (shm_ ? kShmLinkFraction : 1.0) * kGB;
  }
  const double total_gbps = nccl_link_total_bytes_per_s_ / kGB;
  RingGraph graph;
  switch (arch_) {
    case Arch::kAmpere:
      graph = search_ring(total_gbps, kSpeedsAmpere);
      break;
    case Arch::kHopper:
      graph = search_ring(total_gbps, kSpeedsHopper);
      break;
    case Arch::kBlackwell:
      graph = search_ring(total_gbps, kSpeedsBlackwell);
      break;
  }
  ring_channels_ = graph.channels;
  ring_channel_bytes_per_s_ = graph.channel_gbps * kGB;
  network_bytes_per_s_per_gpu_ = core::network_bytes_per_s_per_gpu(profile).value_or(0);
}

void NcclTunerCostModel::check(const CollectiveShape& shape) const {
  check_collective_shape(shape, gpus_per_node_, network_bytes_per_s_per_gpu_ > 0);
}

std::string NcclTunerCostModel::path_description() const {
  if (nvlink_) return nvswitch_ ? "NVLink/NVSwitch" : "NVLink";
  return shm_ ? "PCI (SHM through host memory, no P2P)" : "PCI (P2P)";
}

double NcclTunerCostModel::derived_ring_bus_bandwidth_bytes_per_s(int ranks, int nodes) const {
  const double intra = ring_channels_ * ring_channel_bytes_per_s_;
  if (nodes <= 1) return intra;
  // Two tiers: rings cross the network on every NIC in parallel, so a node's NIC total
  // (the per-GPU share x the ranks on the node) bounds the ring; busBW across nodes is about
  // that total (192 GB/s on DGX A100 with 8x 200 Gb, NVIDIA/nccl #812).
  const double network = network_bytes_per_s_per_gpu_ * (ranks / nodes) * kNicEfficiency;
  return std::min(intra, network);
}

double NcclTunerCostModel::nvls_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const {
  if (!nvlink_ || !nvswitch_ || arch_ == Arch::kAmpere) return 0;
  const int a = static_cast<int>(arch_);
  const double ch = kNvlsChannels[static_cast<std::size_t>(a)];
  const double alg = nccl_link_total_bytes_per_s_ * kNvlsEfficiency[static_cast<std::size_t>(a)] *
                     (ch - 1) / ch;
  const double n = ranks;
  // All-reduce: `alg` is the algorithm bandwidth (8x H100: 296 vs ~275 measured, nccl-tests
  // #212); as busbw x 2(n-1)/n. AG/RS: x (ppn-1)/ppn on the bus figure.
  if (kind == CollectiveKind::kAllReduce) return alg * 2 * (n - 1) / n;
  return alg * (n - 1) / n;
}

bool NcclTunerCostModel::nvls_available(const CollectiveShape& shape) const {
  const bool measured = calibration_.allgather_bus_bandwidth_bytes_per_s ||
                        calibration_.reduce_scatter_bus_bandwidth_bytes_per_s ||
                        calibration_.all_reduce_bus_bandwidth_bytes_per_s;
  return nvlink_ && nvswitch_ && arch_ != Arch::kAmpere && shape.nodes == 1 && shape.ranks >= 2 &&
         shape.ranks <= kMaxNvlsRanks && !measured;
}

TimeNs NcclTunerCostModel::ring_latency_ns(const CollectiveShape& shape, NcclProtocol protocol,
                                           int channels) const {
  if (calibration_.collective_latency_ns) return *calibration_.collective_latency_ns;
  const auto p = static_cast<std::size_t>(index(protocol));
  const double intra_hop = (nvlink_ ? kRingNvlinkHopUs[p] : kRingPciHopUs[p]) +
                           (shm_ ? kShmExtraHopUs : 0.0);
  const auto total_steps = static_cast<double>(ring_steps(shape.kind, shape.ranks));
  if (shape.nodes == 1) return us_to_ns(kRingBaseUs[p] + total_steps * intra_hop);
  const auto inter_steps = static_cast<double>(ring_steps(shape.kind, shape.nodes));
  const double overhead =
      kNetOverheadUs * (protocol == NcclProtocol::kSimple ? kSimpleNetOverheadFactor : 1.0);
  const double inter_hop = shape.ranks == shape.nodes ? kTreeNetHopUs[p] : kRingNetHopUs[p];
  double us = kRingBaseUs[p] + (total_steps - inter_steps) * std::max(intra_hop, overhead) +
              inter_steps * inter_hop;
  if (shape.kind == CollectiveKind::kAllReduce && protocol == NcclProtocol::kSimple &&
      static_cast<double>(shape.bytes) / (channels * shape.ranks) >= kPlateauBytesPerChannelRank) {
    us *= kAllReducePlateauFactor;
  }
  return us_to_ns(us);
}

double NcclTunerCostModel::ring_bus_bandwidth(CollectiveKind phase, const CollectiveShape& shape,
                                              NcclProtocol protocol) const {
  std::optional<double> measured = phase == CollectiveKind::kReduceScatter
                                       ? calibration_.reduce_scatter_bus_bandwidth_bytes_per_s
                                       : calibration_.allgather_bus_bandwidth_bytes_per_s;
  if (shape.kind == CollectiveKind::kAllReduce && calibration_.all_reduce_bus_bandwidth_bytes_per_s) {
    measured = calibration_.all_reduce_bus_bandwidth_bytes_per_s;
  }
  const double simple =
      measured ? *measured : derived_ring_bus_bandwidth_bytes_per_s(shape.ranks, shape.nodes);
  const auto a = static_cast<std::size_t>(arch_);
  switch (protocol) {
    case NcclProtocol::kSimple:
      return simple;
    case NcclProtocol::kLL:
      return std::min(kLlMaxGBps[a] * kGB, kLlFraction * simple);
    case NcclProtocol::kLL128:
      return std::min(kLl128Fraction * simple, ring_channels_ * kLl128PerChannelGBps[a] * kGB);
  }
  return simple;
}

std::optional<NcclChoice> NcclTunerCostModel::evaluate(const CollectiveShape& shape,
                                                       NcclAlgorithm algorithm,
                                                       NcclProtocol protocol) const {
  check(shape);
  NcclChoice c;
  c.algorithm = algorithm;
  c.protocol = protocol;
  if (shape.ranks == 1) {
    c.channels = c.graph_channels = 1;
    return c;
  }
  const double n = shape.ranks;
  const double bytes = static_cast<double>(shape.bytes);
  const double moved = (n - 1) / n * bytes;  // per ring phase, nccl-tests' busbw convention
  double seconds = 0;
  if (algorithm == NcclAlgorithm::kNvls) {
    if (protocol != NcclProtocol::kSimple || !nvls_available(shape)) return std::nullopt;
    c.graph_channels = c.channels = kNvlsChannels[static_cast<std::size_t>(arch_)];
    c.latency_ns = us_to_ns(kNvlsLatencyUs);
    c.bus_bandwidth_bytes_per_s = nvls_bus_bandwidth_bytes_per_s(shape.kind, shape.ranks);
    const double factor = shape.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
    seconds = factor * moved / c.bus_bandwidth_bytes_per_s;
    c.tuner_ns = c.duration_ns = c.latency_ns + seconds_to_ns(seconds);
    c.tuner_seconds = static_cast<double>(c.latency_ns) * 1e-9 + seconds;
    return c;
  }
  // LL128 needs NVLink-class ordering (typeIntra <= PATH_NVB); on PCIe NCCL picks LL or Simple.
  if (protocol == NcclProtocol::kLL128 && !nvlink_) return std::nullopt;
  c.graph_channels = ring_channels_;
  const double unit = channel_unit_bytes(protocol, shape.ranks);
  c.channels = static_cast<int>(std::clamp(std::floor(bytes / unit), 1.0,
                                           static_cast<double>(ring_channels_)));
  c.latency_ns = ring_latency_ns(shape, protocol, ring_channels_);
  if (shape.kind != CollectiveKind::kAllGather) {  // reduce-scatter, or all-reduce's first half
    seconds += moved / ring_bus_bandwidth(CollectiveKind::kReduceScatter, shape, protocol);
  }
  if (shape.kind != CollectiveKind::kReduceScatter) {  // all-gather, or all-reduce's second half
    seconds += moved / ring_bus_bandwidth(CollectiveKind::kAllGather, shape, protocol);
  }
  const double phases = shape.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  c.bus_bandwidth_bytes_per_s = seconds > 0 ? phases * moved / seconds
                                            : ring_bus_bandwidth(shape.kind, shape, protocol);
  c.tuner_ns = c.latency_ns + seconds_to_ns(seconds);
  c.tuner_seconds = static_cast<double>(c.latency_ns) * 1e-9 + seconds;
  c.duration_ns = c.latency_ns + seconds_to_ns(seconds * c.graph_channels / c.channels);
  return c;
}

NcclChoice NcclTunerCostModel::choose(const CollectiveShape& shape, AlgorithmFilter filter) const {
  check(shape);
  if (filter == AlgorithmFilter::kNvls && !nvls_available(shape)) {
    throw std::invalid_argument(
        "NVLS needs NVSwitch on Hopper or later, one node, 2..32 ranks and no measured bus "
        "bandwidth in the calibration; this is " + path_description());
  }
  std::optional<NcclChoice> best;
  const auto consider = [&](NcclAlgorithm a, NcclProtocol p) {
    const auto c = evaluate(shape, a, p);
    if (c && (!best || c->tuner_seconds < best->tuner_seconds)) best = c;
  };
  if (filter != AlgorithmFilter::kNvls) {
    for (const auto p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      consider(NcclAlgorithm::kRing, p);
    }
  }
  if (filter != AlgorithmFilter::kRing) consider(NcclAlgorithm::kNvls, NcclProtocol::kSimple);
  return *best;
}

TimeNs NcclTunerCostModel::duration_ns(const CollectiveShape& shape) const {
  return choose(shape).duration_ns;
}

}  // namespace prefetchlab::sim
