#pragma once
// Quantities computed from a HardwareProfile's facts. Kept out of the profile so a profile can
// never hold a derived number that disagrees with its inputs. These are *link* rates; what a
// collective achieves on them (protocol overhead, channels, latency) is the NCCL model's job.
#include <optional>

#include "core/hardware/hardware_profile.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// Payload rate of one direction of a PCIe link: GT/s per lane (8, 16, 32, 64 for Gen3..6)
// times 128b/130b encoding, over 8 bits. Gen4 x16 ~31.5e9, Gen5 x16 ~63.0e9 B/s.
double pcie_unidirectional_bytes_per_s(int generation, int lanes);

// Share of the theoretical PCIe rate a pinned copy reaches: ~80% on Gen3/Gen4, ~88% on Gen5
// (measured: Gen3 12.2 of 15.75 GB/s, mpicbg-scicomp/gearshifft #82; Gen4 ~25 of 31.5,
// NVIDIA/nvbandwidth #15 and #42; Gen5 55.4 of 63, stas00/ml-engineering network/README.md).
// Gen6 is assumed to behave like Gen5 (no measurement at hand).
double pcie_achievable_fraction(int generation);

// One GPU's unidirectional rate to its peers inside a node: NVLink links x per-link rate, or
// its PCIe link (with or without peer-to-peer; the path cost of no-P2P is the tuner's job).
double intra_node_unidirectional_bytes_per_s(const HardwareProfile& profile);

// One GPU's share of the node's NIC line rate; nullopt when the profile has no network.
std::optional<double> network_bytes_per_s_per_gpu(const HardwareProfile& profile);

// Pinned host<->device copy rate: the measured value when the profile has one, else the PCIe
// rate times pcie_achievable_fraction.
double host_to_device_bytes_per_s(const HardwareProfile& profile);
double device_to_host_bytes_per_s(const HardwareProfile& profile);
// The same while the opposite direction copies at once: the measured bidirectional rate when the
// profile has one, else the one-way rate (PCIe is full duplex).
double host_to_device_bidirectional_bytes_per_s(const HardwareProfile& profile);
double device_to_host_bidirectional_bytes_per_s(const HardwareProfile& profile);

// Peak dense (tensor-core for bf16/fp16) rate for a dtype. fp16 without its own value uses the
// bf16 rate (equal on Ampere and later); fp32 without a value is nullopt (no guess).
std::optional<double> peak_dense_flops_per_s(const HardwareProfile& profile, DType dtype);

}  // namespace prefetchlab::core
