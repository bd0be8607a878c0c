#pragma once
// A hardware profile holds facts about the parts as a vendor or a measurement states them
// (GPU, links, NICs). Anything computed from those facts (aggregate link bandwidth, achievable
// host copy rate, per-GPU network share) lives in hardware_derived.hpp, so a profile never
// carries two numbers that can disagree. The one exception is deliberate: `calibration` may
// hold measured collective figures, which then replace what the cost model derives.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/hardware/calibration.hpp"

namespace prefetchlab::core {

struct GpuSpec {
  std::string model;  // e.g. "NVIDIA H100 SXM 80GB"
  std::int64_t memory_bytes = 0;
  // gpu.cuda_memory: what CUDA reports as the device's total on an empty device
  // (torch.cuda.mem_get_info()[1]), below the nominal size by what the driver keeps; 0 = not
  // stated (memory_bytes is used). core/hardware/device_memory_budget.hpp.
  std::int64_t cuda_memory_bytes = 0;
  double bf16_dense_flops_per_s = 0;             // tensor cores, no sparsity
  std::optional<double> fp16_dense_flops_per_s;  // absent: same rate as bf16
  std::optional<double> fp32_flops_per_s;        // absent: not stated
  double memory_bandwidth_bytes_per_s = 0;
  int sm_count = 0;
};

// GPU-to-GPU inside a node over NVLink (optionally through NVSwitch).
struct NvlinkLink {
  int generation = 0;
  int links_per_gpu = 0;
  double per_link_unidirectional_bytes_per_s = 0;
  bool nvswitch = false;
};

// GPU-to-GPU inside a node over PCIe. Without peer-to-peer NCCL stages through host memory.
struct PcieLink {
  int generation = 0;  // 3..6
  int lanes = 0;       // 1, 2, 4, 8 or 16
  bool peer_to_peer = false;
};

// GPU to CPU. Measured pinned-copy rates, when known, beat any rule of thumb.
struct HostLink {
  int pcie_generation = 0;
  int pcie_lanes = 0;
  std::optional<double> measured_host_to_device_bytes_per_s;
  std::optional<double> measured_device_to_host_bytes_per_s;
  // Copy-engine rate of one direction while the other direction copies at the same time
  // (nvbandwidth's host_to_device_bidirectional_memcpy_ce / device_to_host_...). Absent: PCIe
  // is full duplex, each direction keeps its one-way rate.
  std::optional<double> measured_bidirectional_host_to_device_bytes_per_s;
  std::optional<double> measured_bidirectional_device_to_host_bytes_per_s;
  // GPUs behind one PCIe switch whose single uplink to the CPU they share (nvidia-smi topo -m
  // shows PIX or PXB between them); 1 = every GPU has its own link to the CPU.
  int gpus_per_switch_uplink = 1;
};

struct NetworkSpec {
  int nics_per_node = 0;
  double nic_bits_per_s = 0;  // line rate of one NIC
  // What a message pays per network crossing beyond NCCL's latency constants, where the
  // transport is slower than they assume and its plugin does not say so (NCCL's latencyInter
  // stays 0): host-assisted TCP such as Google's GPUDirect-TCPXO. 0 for InfiniBand / RoCE.
  double transport_latency_ns = 0;
};

struct HardwareProfile {
  std::string name;         // defaults to the file stem
  std::string source_file;  // where it was loaded from, for messages
  GpuSpec gpu;
  int gpus_per_node = 0;
  std::variant<NvlinkLink, PcieLink> intra_node_link;
  HostLink host_link;
  std::optional<NetworkSpec> network;  // required when max_nodes > 1
  int max_nodes = 1;
  // The cost models' tunable numbers: defaults for this GPU (default_calibration) with the
  // profile's optional `calibration:` section applied over them.
  CalibrationConstants calibration;
};

// Strict: unknown keys, wrong types, non-positive rates and keys that do not fit the link kind
// are InputErrors naming file, line and key.
HardwareProfile load_hardware_profile(const std::filesystem::path& file);

// Stems of the *.yaml files in `dir`, sorted ("h100-sxm-8x", ...). Empty if `dir` is missing.
std::vector<std::string> bundled_hardware_names(const std::filesystem::path& dir);

// A user names hardware either by path or by bundled name (file stem). Returns the file that
// `name_or_path` means, or nullopt; callers report the error at their own file and key,
// suggesting from bundled_hardware_names.
std::optional<std::filesystem::path> find_hardware_profile(
    std::string_view name_or_path, const std::filesystem::path& bundled_dir);

}  // namespace prefetchlab::core
