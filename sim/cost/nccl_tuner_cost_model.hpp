#pragma once
// The collective cost model that follows NCCL's own tuner (NVIDIA/nccl src/graph/tuning.cc,
// search.cc, topo.cc, topo.h, src/enqueue.cc; constants as in 2.28-2.30). For every call it
// evaluates each algorithm/protocol NCCL would consider and keeps the one with the lowest
// predicted time, as NCCL does:
//   Ring (all three):  AG/RS t = lat + (n-1)/n * S / busBW; all-reduce both phases
//   Tree (all-reduce): t = lat + S / (busBW / 2 x a size correction), lat logarithmic in nodes
//   NVLS (one node, NVSwitch, Hopper+) and NVLSTree (all-reduce across nodes)
//   PAT (all-gather / reduce-scatter with one GPU per node)
// with NCCL's base and per-hop latency constants and bus bandwidths from the graphs NCCL's search
// would build on the profile's links: the intra-node ring, and across nodes rings whose channels
// each ride one NIC (a rail). NCCL then runs a call on fewer channels when the message is small
// (enqueue.cc); the model charges the bandwidth term at the fraction of channels in use.
//
// Where the transport runs slower than NCCL's tuner assumes, the choice still follows NCCL's
// estimate but the time charged is the slower one (NcclChoice::charged_*):
//   - PCIe without peer-to-peer: NCCL's SHM transport (src/transport/shm.cc) puts each
//     connection's FIFO in pinned host memory, the sender's kernel stores into it across its
//     PCIe link and the receiver's kernel loads from it across its own. So every byte crosses
//     PCIe twice, and a ring step that only sends (the first, copySend / send) or only receives
//     (the last, recv) leaves one direction of each link idle (src/device/all_gather.h,
//     reduce_scatter.h, all_reduce.h runRing). An all-gather has one such pair per n-1 block
//     transfers, an all-reduce one per 2(n-1): all-gather is the slower of the two there.
//     Rates: the host link's copy rates per direction (measured or derived), shared by the GPUs
//     behind one switch uplink, and the bidirectional rate where both directions run at once.
//   - Rings across nodes: every step pays a network step (see ring charged latency).
//
// Calibration: a measured curve for the call's op and group (measured_collectives, from
// calibrate --from-nccl-tests) gives the time outright (choose with kAuto); otherwise a
// measured collective_latency_us replaces every latency; measured bus
// bandwidths replace the Simple ring figure (LL and LL128 follow from it) and switch the other
// algorithms off, since they describe the collective as it ran.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost/collective_cost_model.hpp"

namespace prefetchlab::sim {

enum class NcclAlgorithm { kRing, kTree, kNvls, kNvlsTree, kPat };
enum class NcclProtocol { kLL, kLL128, kSimple };
// NCCL's spellings in its INFO lines: "RING", "TREE", "NVLS", "NVLS_TREE", "PAT"; "LL", "LL128",
// "SIMPLE".
const char* nccl_algorithm_name(NcclAlgorithm algorithm);
const char* nccl_protocol_name(NcclProtocol protocol);

// Which algorithms `choose` may use: kAuto = every one NCCL would consider here.
enum class AlgorithmFilter { kAuto, kRing, kTree, kNvls, kNvlsTree, kPat };
// "auto", "ring", "tree", "nvls", "nvls_tree", "pat" (nullopt for anything else), and the
// algorithm a filter other than kAuto names.
std::optional<AlgorithmFilter> algorithm_filter_from_name(std::string_view name);
std::optional<NcclAlgorithm> only_algorithm(AlgorithmFilter filter);

// The algorithms and protocols a job's environment lets NCCL use: NCCL_ALGO and NCCL_PROTO,
// comma-separated lists of NCCL's names, any case (NCCL's docs, "Environment Variables").
// Google's GPUDirect-TCPXO profiles, for one, set NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple and
// NCCL_NVLS_ENABLE=0 (GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpxo/README.md).
struct NcclAllowed {
  bool ring = true, tree = true, nvls = true, nvls_tree = true, pat = true;
  bool ll = true, ll128 = true, simple = true;
  bool allows(NcclAlgorithm algorithm) const;
  bool allows(NcclProtocol protocol) const;
  bool everything() const { return ring && tree && nvls && nvls_tree && pat && ll && ll128 && simple; }
  // Keeps only the listed algorithms ("Ring,Tree"; also NVLS, NVLSTree or NVLS_TREE, PAT) /
  // protocols ("Simple,LL128"); false for an unknown name or an empty list.
  bool restrict_algorithms(std::string_view list);
  bool restrict_protocols(std::string_view list);
  // The names each list takes, for messages.
  static constexpr const char* kAlgorithmNames = "Ring, Tree, NVLS, NVLSTree, PAT";
  static constexpr const char* kProtocolNames = "LL, LL128, Simple";
};

// The tuner's answer for one call.
struct NcclChoice {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  int channels = 0;        // channels this call runs on (fewer for small messages)
  int graph_channels = 0;  // channels of the communicator's graph for this algorithm
  // NCCL's estimate (what the choice compares). Bus bandwidth in nccl-tests' busbw units, all
  // graph channels.
  TimeNs latency_ns = 0;
  double bus_bandwidth_bytes_per_s = 0;
  TimeNs tuner_ns = 0;       // NCCL's estimate: all channels
  double tuner_seconds = 0;  // the same, unrounded (ties below 1 ns are not ties)
  // What the model charges: NCCL's estimate, or slower where the transport is (SHM through host
  // memory, every step of a ring across nodes).
  TimeNs charged_latency_ns = 0;
  double charged_bus_bandwidth_bytes_per_s = 0;
  TimeNs duration_ns = 0;  // charged, on the channels in use
  // The calibration's measured curve set duration_ns (the choice fields above stay the model's,
  // for the record of what NCCL would pick): choose() with kAuto only.
  bool measured = false;
};

// A ring graph: channels x per-channel speed.
struct NcclGraph {
  int channels = 0;
  double channel_bytes_per_s = 0;
  double bytes_per_s() const { return channels * channel_bytes_per_s; }
};

class NcclTunerCostModel final : public CollectiveCostModel {
 public:
  NcclTunerCostModel(const core::HardwareProfile& profile,
                     const core::CalibrationConstants& calibration);

  TimeNs duration_ns(const CollectiveShape& shape) const override;

  // The lowest-time algorithm/protocol for this call (a one-rank group: all zeros, RING
  // SIMPLE). Throws std::invalid_argument on an impossible shape, when `filter` asks for an
  // algorithm NCCL would not run here (see available), or when `allowed` leaves nothing NCCL
  // would run here.
  NcclChoice choose(const CollectiveShape& shape, AlgorithmFilter filter = AlgorithmFilter::kAuto,
                    const NcclAllowed& allowed = {}) const;
  // One algorithm/protocol; nullopt where NCCL would not use it (LL128 off the NVLink class,
  // NVLS / NVLSTree / PAT with LL or LL128, an algorithm unavailable here).
  std::optional<NcclChoice> evaluate(const CollectiveShape& shape, NcclAlgorithm algorithm,
                                     NcclProtocol protocol) const;
  // Whether NCCL would consider the algorithm for this call: Ring always; Tree for all-reduce;
  // NVLS on one node with NVSwitch on Hopper or later, 2..32 ranks; NVLSTree the same across
  // nodes for all-reduce; PAT for all-gather / reduce-scatter with one GPU per node. Measured
  // bus bandwidths in the calibration leave only Ring.
  bool available(const CollectiveShape& shape, NcclAlgorithm algorithm) const;
  bool nvls_available(const CollectiveShape& shape) const {
    return available(shape, NcclAlgorithm::kNvls);
  }

  // The intra-node ring graph NCCL's search settles on (derived).
  int ring_graph_channels() const { return ring_.channels; }
  double ring_channel_bytes_per_s() const { return ring_.channel_bytes_per_s; }
  // The ring (and tree) graph for a group: the intra-node one on one node; across nodes each
  // channel rides one NIC of the node at a speed NCCL's inter-node search allows.
  NcclGraph ring_graph(int ranks, int nodes) const;
  // NICs (rails) the ranks of one node reach: the NICs nearest to them.
  int rails(int ranks_per_node) const;
  // Ring Simple bus bandwidth as NCCL's tuner sees it (no calibration override).
  double derived_ring_bus_bandwidth_bytes_per_s(int ranks, int nodes) const;
  // Ring Simple bus bandwidth the model charges (no calibration override): NCCL's figure, at most
  // what the links achieve (NVLink / PCIe rings as measured, the rails' NICs at 97% of line rate)
  // and, through host memory, what the SHM transport achieves for this kind.
  double charged_ring_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks, int nodes) const;
  // The SHM transport's ring Simple bus bandwidth for this kind on one node (0 with peer-to-peer).
  double shm_ring_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const;
  // NVLS bus bandwidth for this kind on one node (0 where NVLS is unavailable).
  double nvls_bus_bandwidth_bytes_per_s(CollectiveKind kind, int ranks) const;
  // "NVLink", "PCI" or "PCI (SHM through host memory)": the hop class of the ring.
  std::string path_description() const;

 private:
  // NCCL's compute-capability classes (tuning.cc): Volta also covers Turing (sm_70..sm_75).
  enum class Arch { kVolta, kAmpere, kHopper, kBlackwell };
  void check(const CollectiveShape& shape) const;
  bool measured_bandwidth() const;
  double ll_max_bytes_per_s(int nodes) const;
  double ring_protocol_bus(NcclProtocol protocol, double simple, int graph_channels, int nodes) const;
  double tree_protocol_bus(NcclProtocol protocol, double raw, int graph_channels, int nodes) const;
  TimeNs ring_latency_ns(const CollectiveShape& shape, NcclProtocol protocol, int channels) const;
  TimeNs ring_charged_latency_ns(const CollectiveShape& shape, NcclProtocol protocol,
                                 TimeNs tuner_latency) const;
  double measured_or(CollectiveKind phase, const CollectiveShape& shape, double derived) const;
  // The profile's network.transport_latency_us over the call's network crossings.
  TimeNs transport_latency_ns(const CollectiveShape& shape, NcclAlgorithm algorithm) const;
  NcclGraph nvls_tree_graph(int ranks_per_node) const;

  Arch arch_ = Arch::kAmpere;
  double transport_latency_per_crossing_ns_ = 0;
  bool nvlink_ = false;
  bool nvswitch_ = false;
  bool shm_ = false;  // PCIe without peer-to-peer: through host memory
  int gpus_per_node_ = 0;
  double nccl_link_total_bytes_per_s_ = 0;  // one GPU's intra-node total as NCCL's topology sees it
  double achievable_intra_bytes_per_s_ = 0;  // what an intra-node ring reaches (= NCCL's figure)
  NcclGraph ring_;                           // intra-node ring graph
  // Network: NICs per node, one NIC's line rate (bytes/s), the host PCIe link as NCCL sees it.
  int nics_per_node_ = 0;
  double nic_bytes_per_s_ = 0;
  double host_pci_bytes_per_s_ = 0;
  // SHM transport: each direction of one GPU's host link, alone and with the other direction
  // busy; GPUs sharing one switch uplink.
  double shm_write_ = 0, shm_read_ = 0, shm_write_bidir_ = 0, shm_read_bidir_ = 0;
  int gpus_per_uplink_ = 1;
  core::CalibrationConstants calibration_;
};

}  // namespace prefetchlab::sim
