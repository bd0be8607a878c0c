#include "sim/cost/nccl_tuner_cost_model.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "core/hardware/hardware_derived.hpp"

namespace prefetchlab::sim {
namespace {

constexpr double kGB = 1e9;
constexpr double kNsPerUs = 1e3;
constexpr int kProtocols = 3;  // LL, LL128, Simple: NCCL's order
constexpr int kArchs = 4;      // Volta, Ampere, Hopper, Blackwell: tuning.cc's compCapIndex
using PerProtocol = std::array<double, kProtocols>;
// [arch][nodes class: 1 node, 2 nodes, more] as tuning.cc indexes its per-channel caps.
using PerArchNodes = std::array<std::array<double, 3>, kArchs>;

std::size_t index(NcclProtocol p) { return static_cast<std::size_t>(p); }

// --- Latency constants, us (NVIDIA/nccl src/graph/tuning.cc ncclTunerConstantsDefaults) -----
constexpr PerProtocol kRingBaseUs{6.6, 14.0, 8.4};
constexpr PerProtocol kTreeBaseUs{6.8, 14.0, 8.4};
constexpr PerProtocol kRingNvlinkHopUs{0.6, 1.9, 3.4};
constexpr PerProtocol kRingPciHopUs{1.0, 2.5, 5.7};
constexpr PerProtocol kRingNetHopUs{2.7, 4.0, 14.0};
constexpr PerProtocol kTreeNvlinkHopUs{0.6, 1.25, 4.0};
constexpr PerProtocol kTreePciHopUs{1.0, 1.9, 4.0};
// The Tree NET latency; with one GPU per node NCCL also takes it for the other algorithms'
// inter-node steps (nothing hides the network there).
constexpr PerProtocol kTreeNetHopUs{5.0, 8.5, 14.0};
// netOverhead: 1.0 us on Intel x86 and other CPUs (2.0 on AMD; profiles do not name the CPU),
// x3 for Simple. The graph's latencyInter (NIC plugin property, known at run time) is taken as 0.
constexpr double kNetOverheadUs = 1.0;
constexpr double kSimpleNetOverheadFactor = 3.0;
// Multi-node ring all-reduce with Simple on Ampere and later: latency x1.4 once
// nBytes / (nChannels * nRanks) >= 64 (the "plateau effect").
constexpr double kAllReducePlateauFactor = 1.4;
constexpr double kPlateauBytesPerChannelRank = 64;
// NVLS / NVLSTree (Simple only, no base): the NVLink NVLS latency 25 us; NVLSTree adds
// 2 log2(nodes) NET NVLSTree steps of 20.9 us.
constexpr double kNvlsLatencyUs = 25.0;
constexpr double kNvlsTreeNetHopUs = 20.9;
// PAT (all-gather / reduce-scatter, one GPU per node, Simple only):
// 8.0 + log2(nodes) x interLat / 3.5 + nRanks x 2.8, bandwidth 0.75 of the ring's.
constexpr double kPatBaseUs = 8.0;
constexpr double kPatLogDivisor = 3.5;
constexpr double kPatPerRankUs = 2.8;
constexpr double kPatBandwidthFactor = 0.75;
// PCIe without peer-to-peer, per ring step, every protocol: not a tuner constant (NCCL's tuner
// charges the PCI class) but what the SHM transport costs on top: 8x RTX 4090 all_reduce of
// 8 B takes 40-42 us (NVIDIA/nccl #1530) where the PCI LL constants give 6.6 + 14 x 1.0 =
// 20.6 us, i.e. ~1.5 us more per step; 2x RTX 2080 Ti 12.25 us against 6.6 + 2 x 1.0 = 8.6
// (posts/AutoDL_Multi-GPU_Interconnection_Test.md in GitHub Anthony-Hoo/Anthony-Hoo.github.io)
// agrees. Charged, not part of the choice.
constexpr double kShmExtraHopUs = 1.5;

// --- Bandwidth (NVIDIA/nccl src/graph/topo.h, topo.cc, search.cc, tuning.cc) -------------
// Per-NVLink-link speed NCCL's topology assigns, GB/s: SM70/SM80 20.0, SM90 20.6, SM100 40.1.
constexpr double kNvlinkAmpereGBps = 20.0;
constexpr double kNvlinkHopperGBps = 20.6;
constexpr double kNvlinkBlackwellGBps = 40.1;
// PCIe: width x per-lane rate / 80 with 60/120/240/480 for Gen3..6 (topo.cc kvDictPciGen):
// x16 Gen3 12, Gen4 24, Gen5 48, Gen6 96 GB/s.
double nccl_pcie_gbps(int generation, int lanes) {
  const double per_lane = 60.0 * std::pow(2.0, generation - 3);
  return lanes * per_lane / 80.0;
}
// Per-channel ring speeds the search tries (GB/s), by generation: on one node (speedArrayIntra)
// and with NICs in the system (speedArrayInter).
constexpr std::array<double, 13> kSpeedsAmpere{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 11> kSpeedsHopper{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 12> kSpeedsBlackwell{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
constexpr std::array<double, 19> kInterSpeedsAmpere{48, 30, 28, 24, 20, 18, 15, 12, 10, 9,
                                                    7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 17> kInterSpeedsHopper{48, 45, 42, 40, 30, 24, 22, 20, 17.5,
                                                    15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 19> kInterSpeedsBlackwell{96, 80, 48, 45.1, 42, 40, 30, 24, 22, 20,
                                                       17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
// Search bounds: at most MAXCHANNELS/2 rings, at least 2 (sjeaugey, NVIDIA/nccl #689).
constexpr int kMaxSearchChannels = 32;
constexpr int kMinChannels = 2;
// The search lowers the speed only while the next one is above 0.49 of the best so far.
constexpr double kSpeedStepFloor = 0.49;
// ncclTopoDupChannels: rings of >= 25 GB/s per channel are duplicated (twice the channels, each
// half the speed), except on compute capability > 80 below 50 GB/s with more than 4 channels.
// It changes the channel count, not the total.
constexpr double kDuplicateAboveGBps = 25.0;
constexpr double kNoDuplicateBelowGBps = 50.0;
constexpr int kNoDuplicateAboveChannels = 4;
constexpr int kMaxChannels = 64;  // MAXCHANNELS
// LL: min(llMaxBw, 0.5 x busBW). llMaxBw: one node by GPU class; across nodes by CPU class
// (Intel rows: 39.0 on 2 nodes, 20.4 beyond; profiles do not name the CPU).
constexpr double kLlFraction = 0.5;
constexpr PerArchNodes kLlMaxGBps{{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0},
                                   {282.0, 90.0, 70.0}}};
// LL128: min(0.92 x busBW, nChannels x per-channel cap).
constexpr double kLl128Fraction = 0.92;
constexpr std::array<double, kArchs> kRingLl128PerChannelGBps{20.0, 20.0, 36.7, 40.0};
// Tree: min(0.92 x busBW, nChannels x perChMaxTreeBw); LL /3.8 (capped by llMaxBw); LL128
// x7/9 on one node, x120/128 across nodes, capped per channel. Algorithm bandwidth = half.
constexpr double kTreeFraction = 0.92;
constexpr double kTreeLlDivisor = 3.8;
constexpr double kTreeLl128OneNode = 7.0 / 9.0;
constexpr double kTreeLl128Nodes = 120.0 / 128.0;
constexpr PerArchNodes kTreePerChannelGBps{{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8},
                                            {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}};
constexpr PerArchNodes kTreeLl128PerChannelGBps{{{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0},
                                                 {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}};
constexpr PerArchNodes kNvlsTreePerChannelGBps{{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8},
                                                {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}}};
// "Trees are not perfectly sticking to the model for medium sizes": NCCL's static correction of
// the tree bandwidth by log2(nBytes / 64), 64 B .. 256 MiB; 1.0 beyond.
constexpr std::array<std::array<double, 24>, kProtocols> kTreeCorrection{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};
constexpr int kTreeCorrectionSizes = 23;  // ncclTopoGetAlgoTime applies logSize 0..22
// NVLS: bw = NVLink total x efficiency x (nCh-1)/nCh; efficiency Hopper 0.85, Blackwell 0.74;
// nvlsChannels 16 on SM90, 24 on SM100 in one NVLink domain (nvls.cc).
constexpr std::array<double, kArchs> kNvlsEfficiency{0.0, 0.0, 0.85, 0.74};
constexpr std::array<int, kArchs> kNvlsChannels{0, 0, 16, 24};
constexpr int kMaxNvlsRanks = 32;  // NCCL_MAX_NVLS_ARITY
// Network: a CX-7 400 Gb NIC achieves 48-49 of 50 GB/s (nccl-tests #267); DGX A100 reaches
// 192 GB/s across nodes with 8x 200 Gb (NVIDIA/nccl #812).
constexpr double kNicEfficiency = 0.97;

// Channels in use (enqueue.cc topoGetAlgoInfo): drop channels while
// nBytes < nChannels * nThreads * threshold. Threads and per-thread thresholds (comm.h):
// Simple 512 x 64 B, LL128 640 x 8 B, LL 512 x 8 B (x nRanks on rings).
double channel_unit_bytes(NcclProtocol p, NcclAlgorithm a, int ranks) {
  switch (p) {
    case NcclProtocol::kSimple:
      return 512.0 * 64.0;
    case NcclProtocol::kLL128:
      return 640.0 * 8.0;
    case NcclProtocol::kLL:
      return 512.0 * 8.0 * (a == NcclAlgorithm::kRing ? ranks : 1);
  }
  return 1;
}

std::int64_t ring_steps(CollectiveKind kind, std::int64_t parties) {
  return kind == CollectiveKind::kAllReduce ? 2 * (parties - 1) : parties - 1;
}

// NCCL's log2i: floor(log2(n)), -1 for n < 1.
int log2i(double n) { return n < 1 ? -1 : static_cast<int>(std::floor(std::log2(n) + 1e-12)); }

std::size_t nodes_class(int nodes) { return static_cast<std::size_t>(std::min(nodes, 3) - 1); }

TimeNs seconds_to_ns(double seconds) {
  const double ns = std::round(seconds * 1e9);
  if (!(ns < 4e18)) throw std::overflow_error("collective duration does not fit in int64 ns");
  return static_cast<TimeNs>(ns);
}

TimeNs us_to_ns(double us) { return std::llround(us * kNsPerUs); }

// The search keeps the solution with the highest nChannels x speed (ncclTopoCompareGraphs),
// trying speeds from the fastest down; `fits(s)` is how many channels of speed s the links carry.
template <class Fits>
NcclGraph search(std::span<const double> speeds, double max_gbps, int min_channels, Fits fits) {
  int channels = 0;
  double speed = 0;
  for (int floor_channels : {min_channels, 1}) {
    for (const double s : speeds) {
      if (s > max_gbps + 1e-9) continue;
      if (channels > 0 && s / speed <= kSpeedStepFloor) break;
      const int n = std::min(fits(s), kMaxSearchChannels);
      if (n < floor_channels) continue;
      if (n * s > channels * speed + 1e-9) {
        channels = n;
        speed = s;
      }
    }
    if (channels > 0) break;
  }
  if (channels == 0) return {1, max_gbps};  // slower than every listed speed
  return {channels, speed};
}

}  // namespace

const char* nccl_algorithm_name(NcclAlgorithm algorithm) {
  switch (algorithm) {
    case NcclAlgorithm::kRing:
      return "RING";
    case NcclAlgorithm::kTree:
      return "TREE";
    case NcclAlgorithm::kNvls:
      return "NVLS";
    case NcclAlgorithm::kNvlsTree:
      return "NVLS_TREE";
    case NcclAlgorithm::kPat:
      return "PAT";
  }
  return "?";
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

std::optional<AlgorithmFilter> algorithm_filter_from_name(std::string_view name) {
  static constexpr std::pair<std::string_view, AlgorithmFilter> kNames[] = {
      {"auto", AlgorithmFilter::kAuto}, {"ring", AlgorithmFilter::kRing},          {"tree", AlgorithmFilter::kTree},
      {"nvls", AlgorithmFilter::kNvls}, {"nvls_tree", AlgorithmFilter::kNvlsTree}, {"pat", AlgorithmFilter::kPat}};
  for (const auto& [n, filter] : kNames) {
    if (n == name) return filter;
  }
  return std::nullopt;
}

std::optional<NcclAlgorithm> only_algorithm(AlgorithmFilter filter) {
  switch (filter) {
    case AlgorithmFilter::kAuto: return std::nullopt;
    case AlgorithmFilter::kRing: return NcclAlgorithm::kRing;
    case AlgorithmFilter::kTree: return NcclAlgorithm::kTree;
    case AlgorithmFilter::kNvls: return NcclAlgorithm::kNvls;
    case AlgorithmFilter::kNvlsTree: return NcclAlgorithm::kNvlsTree;
    case AlgorithmFilter::kPat: return NcclAlgorithm::kPat;
  }
  return std::nullopt;
}

bool NcclAllowed::allows(NcclAlgorithm algorithm) const {
  switch (algorithm) {
    case NcclAlgorithm::kRing: return ring;
    case NcclAlgorithm::kTree: return tree;
    case NcclAlgorithm::kNvls: return nvls;
    case NcclAlgorithm::kNvlsTree: return nvls_tree;
    case NcclAlgorithm::kPat: return pat;
  }
  return false;
}

bool NcclAllowed::allows(NcclProtocol protocol) const {
  switch (protocol) {
    case NcclProtocol::kLL: return ll;
    case NcclProtocol::kLL128: return ll128;
    case NcclProtocol::kSimple: return simple;
  }
  return false;
}

namespace {
// Sets the flags `list` names (lower-cased names in `names`) and clears the others; false for
// an unknown name or an empty list.
template <std::size_t N>
bool keep_listed(std::string_view list, const std::pair<std::string_view, bool NcclAllowed::*> (&names)[N],
                 NcclAllowed& allowed) {
  NcclAllowed listed = allowed;
  for (const auto& entry : names) listed.*entry.second = false;
  bool any = false;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string name(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto* it = std::find_if(std::begin(names), std::end(names), [&](const auto& e) { return e.first == name; });
    if (it == std::end(names)) return false;
    listed.*it->second = true;
    any = true;
  }
  if (any) allowed = listed;
  return any;
}
}  // namespace

bool NcclAllowed::restrict_algorithms(std::string_view list) {
  static constexpr std::pair<std::string_view, bool NcclAllowed::*> kNames[] = {
      {"ring", &NcclAllowed::ring},           {"tree", &NcclAllowed::tree},
      {"nvls", &NcclAllowed::nvls},           {"nvlstree", &NcclAllowed::nvls_tree},
      {"nvls_tree", &NcclAllowed::nvls_tree}, {"pat", &NcclAllowed::pat}};
  return keep_listed(list, kNames, *this);
}

bool NcclAllowed::restrict_protocols(std::string_view list) {
  static constexpr std::pair<std::string_view, bool NcclAllowed::*> kNames[] = {
      {"ll", &NcclAllowed::ll}, {"ll128", &NcclAllowed::ll128}, {"simple", &NcclAllowed::simple}};
  return keep_listed(list, kNames, *this);
}

NcclTunerCostModel::NcclTunerCostModel(const core::HardwareProfile& profile,
                                       const core::CalibrationConstants& calibration)
    : gpus_per_node_(profile.gpus_per_node), calibration_(calibration) {
  const std::string& gpu = profile.gpu.model;
  const auto has = [&](const char* s) { return gpu.find(s) != std::string::npos; };
  // Volta and Turing (sm_70..sm_75) share NCCL's Volta class.
  const bool volta_class = has("V100") || has("TITAN V") || has("Tesla T4") || has("TITAN RTX") ||
                           has("RTX 2080") || has("RTX 2070") || has("RTX 2060") || has("Quadro RTX");
  if (const auto* nv = std::get_if<core::NvlinkLink>(&profile.intra_node_link)) {
    nvlink_ = true;
    nvswitch_ = nv->nvswitch;
    if (nv->generation >= 5 || has("B200") || has("B300")) {
      arch_ = Arch::kBlackwell;
    } else if (nv->generation == 4 || has("H100") || has("H200") || has("H800") || has("H20")) {
      arch_ = Arch::kHopper;
    } else if (volta_class) {
      arch_ = Arch::kVolta;
    }
    const double per_link = arch_ == Arch::kBlackwell ? kNvlinkBlackwellGBps
                            : arch_ == Arch::kHopper  ? kNvlinkHopperGBps
                                                      : kNvlinkAmpereGBps;
    nccl_link_total_bytes_per_s_ = nv->links_per_gpu * per_link * kGB;
  } else {
    const auto& pcie = std::get<core::PcieLink>(profile.intra_node_link);
    if (has("H100") || has("H200")) arch_ = Arch::kHopper;
    if (volta_class) arch_ = Arch::kVolta;
    shm_ = !pcie.peer_to_peer;
    // Without P2P NCCL's paths go GPU -> CPU -> GPU (paths.cc): a ring through the CPU crosses a
    // shared switch uplink once per GPU behind it, in each direction.
    gpus_per_uplink_ = std::max(1, profile.host_link.gpus_per_switch_uplink);
    nccl_link_total_bytes_per_s_ =
        nccl_pcie_gbps(pcie.generation, pcie.lanes) / (shm_ ? gpus_per_uplink_ : 1) * kGB;
  }
  const double total_gbps = nccl_link_total_bytes_per_s_ / kGB;
  const auto fits = [&](double s) { return static_cast<int>(std::floor(total_gbps / s + 1e-9)); };
  switch (arch_) {
    case Arch::kVolta:
    case Arch::kAmpere:
      ring_ = search(kSpeedsAmpere, total_gbps, kMinChannels, fits);
      break;
    case Arch::kHopper:
      ring_ = search(kSpeedsHopper, total_gbps, kMinChannels, fits);
      break;
    case Arch::kBlackwell:
      ring_ = search(kSpeedsBlackwell, total_gbps, kMinChannels, fits);
      break;
  }
  const bool keep = arch_ >= Arch::kHopper && ring_.channel_bytes_per_s < kNoDuplicateBelowGBps &&
                    ring_.channels > kNoDuplicateAboveChannels;
  if (ring_.channel_bytes_per_s >= kDuplicateAboveGBps && !keep) {
    const int doubled = std::min(2 * ring_.channels, kMaxChannels);
    ring_.channel_bytes_per_s = ring_.channel_bytes_per_s * ring_.channels / doubled;
    ring_.channels = doubled;
  }
  ring_.channel_bytes_per_s *= kGB;
  achievable_intra_bytes_per_s_ = ring_.bytes_per_s();
  if (profile.network) {
    nics_per_node_ = profile.network->nics_per_node;
    nic_bytes_per_s_ = profile.network->nic_bits_per_s / 8.0;
    transport_latency_per_crossing_ns_ = profile.network->transport_latency_ns;
  }
  host_pci_bytes_per_s_ =
      nccl_pcie_gbps(profile.host_link.pcie_generation, profile.host_link.pcie_lanes) * kGB;
  shm_write_ = core::device_to_host_bytes_per_s(profile);
  shm_read_ = core::host_to_device_bytes_per_s(profile);
  shm_write_bidir_ = core::device_to_host_bidirectional_bytes_per_s(profile);
  shm_read_bidir_ = core::host_to_device_bidirectional_bytes_per_s(profile);
}

void NcclTunerCostModel::check(const CollectiveShape& shape) const {
  check_collective_shape(shape, gpus_per_node_, nics_per_node_ > 0);
}

bool NcclTunerCostModel::measured_bandwidth() const {
  return calibration_.allgather_bus_bandwidth_bytes_per_s ||
         calibration_.reduce_scatter_bus_bandwidth_bytes_per_s ||
         calibration_.all_reduce_bus_bandwidth_bytes_per_s;
}

std::string NcclTunerCostModel::path_description() const {
  if (nvlink_) return nvswitch_ ? "NVLink/NVSwitch" : "NVLink";
  return shm_ ? "PCI (SHM through host memory, no P2P)" : "PCI (P2P)";
}

int NcclTunerCostModel::rails(int ranks_per_node) const {
  if (nics_per_node_ == 0 || gpus_per_node_ == 0) return 0;
  const int near = (ranks_per_node * nics_per_node_ + gpus_per_node_ - 1) / gpus_per_node_;
  return std::clamp(near, 1, nics_per_node_);
}

NcclGraph NcclTunerCostModel::ring_graph(int ranks, int nodes) const {
  if (nodes <= 1 || nics_per_node_ == 0) return ring_;
  // Across nodes (search.cc with NET nodes): each channel enters a node on a NIC, crosses its
  // GPUs and leaves on the same NIC (crossNic 0), so a NIC carries floor(NIC / speed) channels,
  // and a GPU's links carry its (ppn-1)/ppn share of every channel's intra-node hops. The
  // fastest speed is the GPU-to-NIC path (the NIC, or the host PCIe link).
  const int ppn = ranks / nodes;
  const double nic = nic_bytes_per_s_ / kGB;
  const double max_gbps = std::min(nic, host_pci_bytes_per_s_ / kGB);
  const double intra = nccl_link_total_bytes_per_s_ / kGB;
  const int nic_count = rails(ppn);
  const auto fits = [&](double s) {
    const int by_nic = nic_count * static_cast<int>(std::floor(nic / s + 1e-9));
    if (ppn <= 1) return by_nic;
    const int by_intra = static_cast<int>(std::floor(intra * ppn / ((ppn - 1) * s) + 1e-9));
    return std::min(by_nic, by_intra);
  };
  NcclGraph g;
  switch (arch_) {
    case Arch::kVolta:
    case Arch::kAmpere:
      g = search(kInterSpeedsAmpere, max_gbps, 1, fits);
      break;
    case Arch::kHopper:
      g = search(kInterSpeedsHopper, max_gbps, 1, fits);
      break;
    case Arch::kBlackwell:
      g = search(kInterSpeedsBlackwell, max_gbps, 1, fits);
      break;
  }
  const bool keep = arch_ >= Arch::kHopper && g.channel_bytes_per_s < kNoDuplicateBelowGBps &&
                    g.channels > kNoDuplicateAboveChannels;
  if (g.channel_bytes_per_s >= kDuplicateAboveGBps && !keep) {
    const int doubled = std::min(2 * g.channels, kMaxSearchChannels);
    g.channel_bytes_per_s = g.channel_bytes_per_s * g.channels / doubled;
    g.channels = doubled;
  }
  g.channel_bytes_per_s *= kGB;
  return g;
}

double NcclTunerCostModel::derived_ring_bus_bandwidth_bytes_per_s(int ranks, int nodes) const {
  return ring_graph(ranks, nodes).bytes_per_s();
}

double NcclTunerCostModel::shm_ring_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const {
  if (!shm_ || ranks < 2) return 0;
  // Per GPU, k GPUs behind one uplink sharing it in lock-step. A ring step that sends only runs
  // at the write rate, one that receives only at the read rate, one that does both (every
  // other step) at the slower of the two bidirectional rates. Per n-1 blocks an all-gather /
  // reduce-scatter has 1 send-only, n-2 both, 1 receive-only step; per 2(n-1) an all-reduce
  // has 1, 2n-3, 1.
  const double k = std::min(gpus_per_uplink_, std::max(1, ranks));
  const double w = shm_write_ / k;
  const double r = shm_read_ / k;
  const double b = std::min(shm_write_bidir_, shm_read_bidir_) / k;
  const double n = ranks;
  if (kind == CollectiveKind::kAllReduce) return 2 * (n - 1) / (1 / w + (2 * n - 3) / b + 1 / r);
  return (n - 1) / (1 / w + (n - 2) / b + 1 / r);
}

double NcclTunerCostModel::charged_ring_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks,
                                                                  int nodes) const {
  double bus = std::min(derived_ring_bus_bandwidth_bytes_per_s(ranks, nodes),
                        achievable_intra_bytes_per_s_);
  if (nodes > 1) bus = std::min(bus, rails(ranks / nodes) * nic_bytes_per_s_ * kNicEfficiency);
  if (shm_) bus = std::min(bus, shm_ring_bus_bandwidth_bytes_per_s(kind, ranks));
  return bus;
}

double NcclTunerCostModel::nvls_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const {
  if (!nvlink_ || !nvswitch_ || arch_ < Arch::kHopper) return 0;
  const auto a = static_cast<std::size_t>(arch_);
  const double ch = kNvlsChannels[a];
  const double alg = nccl_link_total_bytes_per_s_ * kNvlsEfficiency[a] * (ch - 1) / ch;
  const double n = ranks;
  // All-reduce: `alg` is the algorithm bandwidth (8x H100: 296 vs ~275 measured, nccl-tests
  // #212); as busbw x 2(n-1)/n. AG/RS: x (ppn-1)/ppn on the bus figure.
  if (kind == CollectiveKind::kAllReduce) return alg * 2 * (n - 1) / n;
  return alg * (n - 1) / n;
}

NcclGraph NcclTunerCostModel::nvls_tree_graph(int ranks_per_node) const {
  // One NVLS head per NIC, each at the GPU-to-NIC speed the inter-node search allows.
  const double max_gbps = std::min(nic_bytes_per_s_, host_pci_bytes_per_s_) / kGB;
  std::span<const double> speeds = arch_ == Arch::kBlackwell ? std::span<const double>(kInterSpeedsBlackwell)
                                                             : std::span<const double>(kInterSpeedsHopper);
  double speed = max_gbps;
  for (const double s : speeds) {
    if (s <= max_gbps + 1e-9) {
      speed = s;
      break;
    }
  }
  return {std::min(rails(ranks_per_node), ranks_per_node), speed * kGB};
}

bool NcclTunerCostModel::available(const CollectiveShape& shape, NcclAlgorithm algorithm) const {
  const bool ar = shape.kind == CollectiveKind::kAllReduce;
  const int ppn = shape.ranks / std::max(1, shape.nodes);
  const bool nvls_hw = nvlink_ && nvswitch_ && arch_ >= Arch::kHopper;
  switch (algorithm) {
    case NcclAlgorithm::kRing:
      return true;
    case NcclAlgorithm::kTree:
      return ar && !measured_bandwidth();
    case NcclAlgorithm::kNvls:
      return nvls_hw && shape.nodes == 1 && shape.ranks >= 2 && shape.ranks <= kMaxNvlsRanks &&
             !measured_bandwidth();
    case NcclAlgorithm::kNvlsTree:
      // With one NVLS head (one rail) its intra-node share (nCh-1)/nCh is 0: a bandwidth of 0,
      // which NCCL's tuner skips as unavailable (tuning.cc); a cluster with few NICs per node.
      return ar && nvls_hw && shape.nodes > 1 && nics_per_node_ > 0 && ppn >= 2 &&
             ppn <= kMaxNvlsRanks && std::min(rails(ppn), ppn) >= 2 && !measured_bandwidth();
    case NcclAlgorithm::kPat:
      return !ar && shape.nodes > 1 && ppn == 1 && !measured_bandwidth();
  }
  return false;
}

double NcclTunerCostModel::ll_max_bytes_per_s(int nodes) const {
  const auto row = nodes == 1 ? static_cast<std::size_t>(arch_) : 0;  // across nodes: Intel CPUs
  return kLlMaxGBps[row][nodes_class(nodes)] * kGB;
}

double NcclTunerCostModel::ring_protocol_bus(NcclProtocol protocol, double simple,
                                             int graph_channels, int nodes) const {
  const auto a = static_cast<std::size_t>(arch_);
  switch (protocol) {
    case NcclProtocol::kSimple:
      return simple;
    case NcclProtocol::kLL:
      return std::min(ll_max_bytes_per_s(nodes), kLlFraction * simple);
    case NcclProtocol::kLL128:
      return std::min(kLl128Fraction * simple, graph_channels * kRingLl128PerChannelGBps[a] * kGB);
  }
  return simple;
}

double NcclTunerCostModel::tree_protocol_bus(NcclProtocol protocol, double raw, int graph_channels,
                                             int nodes) const {
  const auto a = static_cast<std::size_t>(arch_);
  const auto nc = nodes_class(nodes);
  const double bus = std::min(kTreeFraction * raw, graph_channels * kTreePerChannelGBps[a][nc] * kGB);
  switch (protocol) {
    case NcclProtocol::kSimple:
      return bus;
    case NcclProtocol::kLL:
      return std::min(bus / kTreeLlDivisor, ll_max_bytes_per_s(nodes));
    case NcclProtocol::kLL128:
      return std::min(bus * (nodes == 1 ? kTreeLl128OneNode : kTreeLl128Nodes),
                      graph_channels * kTreeLl128PerChannelGBps[a][nc] * kGB);
  }
  return bus;
}

TimeNs NcclTunerCostModel::ring_latency_ns(const CollectiveShape& shape, NcclProtocol protocol,
                                           int channels) const {
  if (calibration_.collective_latency_ns) return *calibration_.collective_latency_ns;
  const auto p = index(protocol);
  const double intra_hop = nvlink_ ? kRingNvlinkHopUs[p] : kRingPciHopUs[p];
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

TimeNs NcclTunerCostModel::ring_charged_latency_ns(const CollectiveShape& shape,
                                                   NcclProtocol protocol, TimeNs tuner_latency) const {
  if (calibration_.collective_latency_ns) return tuner_latency;
  const auto p = index(protocol);
  const auto steps = static_cast<double>(ring_steps(shape.kind, shape.ranks));
  if (shape.nodes == 1) return tuner_latency + (shm_ ? us_to_ns(steps * kShmExtraHopUs) : 0);
  // Across nodes NCCL's tuner charges the NET latency only to the node-crossing steps, the
  // others at the intra-node hop. Measured rings run slower, about a NET step for every step:
  //   2x DGX A100 ring all_reduce 8 B 93 us (NVIDIA/nccl #812): tuner 40, every step NET 88;
  //   5x 8 H100 ring all_reduce 1 MiB 355 us (NVIDIA/nccl #1368): tuner LL128 193, 340;
  //   32x 8 H100 all_gather 2 GiB 200 GB/s (NVIDIA/nccl #1218): tuner 299, 225;
  //   4..128 x 8 H100 reduce_scatter 360..260 GB/s (NVIDIA/nccl #1229): every step NET -3..+5%
  //   to 64 nodes, -13% at 128 (8 GiB assumed).
  // "Rings degrade at scale" (sjeaugey, NVIDIA/nccl #1649). An estimate fitted to those, not
  // NCCL's model; it replaces the plateau factor where it is larger.
  const double inter = shape.ranks == shape.nodes ? kTreeNetHopUs[p] : kRingNetHopUs[p];
  return std::max(tuner_latency, us_to_ns(kRingBaseUs[p] + steps * inter));
}

// Charged, not part of the choice: the plugin reports no latency, so NCCL's tuner does not see
// it. The crossings are NCCL's own count of network steps: a ring's node-crossing steps, both
// ways of a tree's log2(nodes) levels, PAT's log2(nodes).
TimeNs NcclTunerCostModel::transport_latency_ns(const CollectiveShape& shape, NcclAlgorithm algorithm) const {
  if (transport_latency_per_crossing_ns_ <= 0 || shape.nodes <= 1 || calibration_.collective_latency_ns) return 0;
  const int levels = std::max(0, log2i(shape.nodes));
  double crossings = 0;
  switch (algorithm) {
    case NcclAlgorithm::kRing: crossings = static_cast<double>(ring_steps(shape.kind, shape.nodes)); break;
    case NcclAlgorithm::kTree:
    case NcclAlgorithm::kNvlsTree: crossings = 2.0 * levels; break;
    case NcclAlgorithm::kPat: crossings = levels; break;
    case NcclAlgorithm::kNvls: crossings = 0; break;
  }
  return static_cast<TimeNs>(std::llround(crossings * transport_latency_per_crossing_ns_));
}

double NcclTunerCostModel::measured_or(CollectiveKind phase, const CollectiveShape& shape,
                                       double derived) const {
  std::optional<double> measured = phase == CollectiveKind::kReduceScatter
                                       ? calibration_.reduce_scatter_bus_bandwidth_bytes_per_s
                                       : calibration_.allgather_bus_bandwidth_bytes_per_s;
  if (shape.kind == CollectiveKind::kAllReduce && calibration_.all_reduce_bus_bandwidth_bytes_per_s) {
    measured = calibration_.all_reduce_bus_bandwidth_bytes_per_s;
  }
  return measured.value_or(derived);
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
  if (!available(shape, algorithm)) return std::nullopt;
  const bool simple_only = algorithm == NcclAlgorithm::kNvls ||
                           algorithm == NcclAlgorithm::kNvlsTree || algorithm == NcclAlgorithm::kPat;
  if (simple_only && protocol != NcclProtocol::kSimple) return std::nullopt;
  // LL128 needs NVLink-class ordering (typeIntra <= PATH_NVB); on PCIe NCCL picks LL or Simple.
  if (protocol == NcclProtocol::kLL128 && !nvlink_) return std::nullopt;
  const auto p = index(protocol);
  const auto a = static_cast<std::size_t>(arch_);
  const int n = shape.ranks;
  const int nodes = shape.nodes;
  const int ppn = n / nodes;
  const double bytes = static_cast<double>(shape.bytes);
  const double moved = (n - 1.0) / n * bytes;  // per ring phase, nccl-tests' busbw convention
  const double phases = shape.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  double tuner_s = 0;    // NCCL's bandwidth term
  double charged_s = 0;  // the charged one
  TimeNs latency = 0;
  TimeNs charged_latency = 0;
  bool all_channels = false;
  switch (algorithm) {
    case NcclAlgorithm::kRing: {
      const NcclGraph g = ring_graph(n, nodes);
      c.graph_channels = g.channels;
      latency = ring_latency_ns(shape, protocol, g.channels);
      charged_latency = ring_charged_latency_ns(shape, protocol, latency);
      const double charged_simple = charged_ring_bus_bandwidth_bytes_per_s(shape.kind, n, nodes);
      for (const auto phase : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather}) {
        if (shape.kind != CollectiveKind::kAllReduce && shape.kind != phase) continue;
        const double tuner_simple = measured_or(phase, shape, g.bytes_per_s());
        const double charged = measured_or(phase, shape, charged_simple);
        tuner_s += moved / ring_protocol_bus(protocol, tuner_simple, g.channels, nodes);
        charged_s += moved / ring_protocol_bus(protocol, charged, g.channels, nodes);
      }
      break;
    }
    case NcclAlgorithm::kTree: {
      // All-reduce as reduce + broadcast down and up NCCL's trees: within a node a chain over
      // the ppn GPUs, across nodes a pair of binary trees (log2 nodes NET steps each way).
      const NcclGraph g = ring_graph(n, nodes);
      c.graph_channels = g.channels;
      const double intra_hop = nvlink_ ? kTreeNvlinkHopUs[p] : kTreePciHopUs[p];
      // On exactly two nodes each tree's reduce and broadcast cross the network once, the two
      // trees in opposite directions, so the network carries half of what the links inside a
      // node do: up to ~2x the network's rate, "on many platforms, NCCL should use Tree on 2
      // nodes for large sizes" (sjeaugey, NVIDIA/nccl #946); 2 nodes of 100 Gb/s EFA: tree
      // busbw 125 Gb/s, ring 60 (NVIDIA/nccl-tests #22); busbw above the network's rate on 2
      // nodes from tree (nccl-tests #196). The graph's and NICs' rates, set at the NIC, double,
      // up to what the links inside a node carry.
      const double network_share = nodes == 2 ? 2.0 : 1.0;
      const double tree_graph_bytes_per_s =
          std::min(network_share * g.bytes_per_s(), std::max(g.bytes_per_s(), achievable_intra_bytes_per_s_));
      latency = calibration_.collective_latency_ns
                    ? *calibration_.collective_latency_ns
                    : us_to_ns(kTreeBaseUs[p] + 2 * ((ppn - 1) * intra_hop +
                                                     std::max(0, log2i(nodes)) * kTreeNetHopUs[p]));
      charged_latency = latency;
      // Every tree GPU both receives and sends in each direction at once: through host memory
      // that is the bidirectional rate of its host link.
      // Across nodes the rails' NICs bound it (twice their rate on two nodes, as above).
      double raw_charged = std::min(tree_graph_bytes_per_s, achievable_intra_bytes_per_s_);
      if (nodes > 1) {
        raw_charged = std::min(raw_charged, network_share * rails(ppn) * nic_bytes_per_s_ * kNicEfficiency);
      }
      if (shm_) {
        const double k = std::min(gpus_per_uplink_, ppn);
        raw_charged = std::min(raw_charged, std::min(shm_write_bidir_, shm_read_bidir_) / k);
      }
      const int log_size = log2i(std::floor(bytes / 64));
      const double correction =
          log_size >= 0 && log_size < kTreeCorrectionSizes ? kTreeCorrection[p][static_cast<std::size_t>(log_size)] : 1.0;
      tuner_s = bytes / (0.5 * tree_protocol_bus(protocol, tree_graph_bytes_per_s, g.channels, nodes) * correction);
      charged_s = bytes / (0.5 * tree_protocol_bus(protocol, raw_charged, g.channels, nodes) * correction);
      break;
    }
    case NcclAlgorithm::kNvls: {
      c.graph_channels = kNvlsChannels[a];
      all_channels = true;
      latency = charged_latency = calibration_.collective_latency_ns ? *calibration_.collective_latency_ns
                                                                     : us_to_ns(kNvlsLatencyUs);
      tuner_s = charged_s = phases * moved / nvls_bus_bandwidth_bytes_per_s(shape.kind, n);
      break;
    }
    case NcclAlgorithm::kNvlsTree: {
      // NVLS inside each node, a tree of NICs across (tuning.cc): per head channel
      // min(NVLS intra x2 for all-reduce, the NIC speed (x2 on 2 nodes), perChMaxNVLSTreeBw).
      const NcclGraph g = nvls_tree_graph(ppn);
      c.graph_channels = g.channels;
      all_channels = true;
      const double ch = g.channels;
      const double speed = g.channel_bytes_per_s;
      const double intra = speed * kNvlsEfficiency[a] * (ch - 1) / ch * 2;
      const double inter = speed * (nodes <= 2 ? 2 : 1);
      const double bus = ch * std::min({intra, inter, kNvlsTreePerChannelGBps[a][nodes_class(nodes)] * kGB});
      latency = charged_latency =
          calibration_.collective_latency_ns
              ? *calibration_.collective_latency_ns
              : us_to_ns(kNvlsLatencyUs + 2 * std::max(0, log2i(nodes)) * kNvlsTreeNetHopUs);
      double correction = 1.0;
      const int log_size = log2i(std::floor(bytes / 64));
      if (arch_ == Arch::kBlackwell && log_size >= 0 && log_size < 24) {
        correction = kTreeCorrection[p][static_cast<std::size_t>(log_size)];
      }
      tuner_s = charged_s = phases * moved / (bus * correction);
      break;
    }
    case NcclAlgorithm::kPat: {
      // Parallel aggregated trees, one GPU per node: logarithmic latency, 0.75 of the ring's
      // bandwidth taken as the algorithm bandwidth.
      const NcclGraph g = ring_graph(n, nodes);
      c.graph_channels = g.channels;
      latency = charged_latency =
          calibration_.collective_latency_ns
              ? *calibration_.collective_latency_ns
              : us_to_ns(kPatBaseUs + std::max(0, log2i(nodes)) * kTreeNetHopUs[p] / kPatLogDivisor +
                         n * kPatPerRankUs);
      tuner_s = bytes / (kPatBandwidthFactor * g.bytes_per_s());
      charged_s = bytes / (kPatBandwidthFactor * charged_ring_bus_bandwidth_bytes_per_s(shape.kind, n, nodes));
      break;
    }
  }
  c.latency_ns = latency;
  c.charged_latency_ns = charged_latency + transport_latency_ns(shape, algorithm);
  c.bus_bandwidth_bytes_per_s = tuner_s > 0 ? phases * moved / tuner_s : 0;
  c.charged_bus_bandwidth_bytes_per_s = charged_s > 0 ? phases * moved / charged_s : 0;
  c.tuner_ns = latency + seconds_to_ns(tuner_s);
  c.tuner_seconds = static_cast<double>(latency) * 1e-9 + tuner_s;
  if (all_channels) {
    c.channels = c.graph_channels;
  } else {
    const double unit = channel_unit_bytes(protocol, algorithm, n);
    c.channels = static_cast<int>(std::clamp(std::floor(bytes / unit), 1.0,
                                             static_cast<double>(c.graph_channels)));
  }
  c.duration_ns = c.charged_latency_ns + seconds_to_ns(charged_s * c.graph_channels / c.channels);
  return c;
}

NcclChoice NcclTunerCostModel::choose(const CollectiveShape& shape, AlgorithmFilter filter,
                                      const NcclAllowed& allowed) const {
  check(shape);
  constexpr std::array<NcclAlgorithm, 5> kAll{NcclAlgorithm::kRing, NcclAlgorithm::kTree,
                                              NcclAlgorithm::kNvls, NcclAlgorithm::kNvlsTree,
                                              NcclAlgorithm::kPat};
  const std::optional<NcclAlgorithm> only = only_algorithm(filter);
  if (only && shape.ranks > 1 && !available(shape, *only)) {
    std::string why;
    switch (*only) {
      case NcclAlgorithm::kTree:
        why = "Tree is for all-reduce only";
        break;
      case NcclAlgorithm::kNvls:
        why = "NVLS needs NVSwitch on Hopper or later, one node, 2..32 ranks";
        break;
      case NcclAlgorithm::kNvlsTree:
        why = "NVLSTree is for all-reduce across nodes with NVSwitch on Hopper or later";
        break;
      case NcclAlgorithm::kPat:
        why = "PAT is for all-gather / reduce-scatter with one GPU per node";
        break;
      case NcclAlgorithm::kRing:
        break;
    }
    throw std::invalid_argument(why + ", and no measured bus bandwidth in the calibration; this is " +
                                path_description() + ", " + std::to_string(shape.ranks) + " ranks on " +
                                std::to_string(shape.nodes) + " node(s)");
  }
  std::optional<NcclChoice> best;
  for (const auto algorithm : kAll) {
    if ((only && algorithm != *only) || !allowed.allows(algorithm)) continue;
    for (const auto p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      if (!allowed.allows(p)) continue;
      const auto c = evaluate(shape, algorithm, p);
      if (c && (!best || c->tuner_seconds < best->tuner_seconds)) best = c;
    }
  }
  if (!best) {
    throw std::invalid_argument(std::string("no algorithm and protocol of the ones allowed runs ") +
                                (only ? nccl_algorithm_name(*only) : "this call") + " here (" +
                                path_description() + ", " + std::to_string(shape.nodes) + " node(s))");
  }
  if (!only && allowed.everything()) {
    if (const auto measured = measured_duration_ns(calibration_, shape)) {
      best->duration_ns = *measured;
      best->measured = true;
    }
  }
  return *best;
}

TimeNs NcclTunerCostModel::duration_ns(const CollectiveShape& shape) const {
  return choose(shape).duration_ns;
}

}  // namespace prefetchlab::sim
