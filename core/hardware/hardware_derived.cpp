#include "core/hardware/hardware_derived.hpp"

#include <stdexcept>
#include <string>

namespace prefetchlab::core {
namespace {

// Per-lane signalling rate doubles each generation from Gen3's 8 GT/s.
double transfers_per_s_per_lane(int generation) {
  switch (generation) {
    case 3:
      return 8e9;
    case 4:
      return 16e9;
    case 5:
      return 32e9;
    case 6:
      return 64e9;
    default:
      throw std::invalid_argument("PCIe generation " + std::to_string(generation) +
                                  " is outside 3..6");
  }
}

// 128b/130b line code (Gen3..5). Gen6 uses FLIT mode with a slightly different overhead; no
// measurement at hand covers it, so the same factor is used there.
constexpr double kPcieEncodingEfficiency = 128.0 / 130.0;
constexpr double kBitsPerByte = 8.0;

}  // namespace

double pcie_unidirectional_bytes_per_s(int generation, int lanes) {
  return transfers_per_s_per_lane(generation) * kPcieEncodingEfficiency / kBitsPerByte * lanes;
}

double pcie_achievable_fraction(int generation) { return generation >= 5 ? 0.88 : 0.80; }

double intra_node_unidirectional_bytes_per_s(const HardwareProfile& profile) {
  if (const auto* nvlink = std::get_if<NvlinkLink>(&profile.intra_node_link)) {
    return nvlink->links_per_gpu * nvlink->per_link_unidirectional_bytes_per_s;
  }
  const auto& pcie = std::get<PcieLink>(profile.intra_node_link);
  return pcie_unidirectional_bytes_per_s(pcie.generation, pcie.lanes);
}

std::optional<double> network_bytes_per_s_per_gpu(const HardwareProfile& profile) {
  if (!profile.network) return std::nullopt;
  const double node_bytes_per_s =
      profile.network->nics_per_node * profile.network->nic_bits_per_s / kBitsPerByte;
  return node_bytes_per_s / profile.gpus_per_node;
}

namespace {
double estimated_host_copy_bytes_per_s(const HostLink& link) {
  return pcie_unidirectional_bytes_per_s(link.pcie_generation, link.pcie_lanes) *
         pcie_achievable_fraction(link.pcie_generation);
}
}  // namespace

double host_to_device_bytes_per_s(const HardwareProfile& profile) {
  return profile.host_link.measured_host_to_device_bytes_per_s.value_or(
      estimated_host_copy_bytes_per_s(profile.host_link));
}

double device_to_host_bytes_per_s(const HardwareProfile& profile) {
  return profile.host_link.measured_device_to_host_bytes_per_s.value_or(
      estimated_host_copy_bytes_per_s(profile.host_link));
}

double host_to_device_bidirectional_bytes_per_s(const HardwareProfile& profile) {
  return profile.host_link.measured_bidirectional_host_to_device_bytes_per_s.value_or(
      host_to_device_bytes_per_s(profile));
}

double device_to_host_bidirectional_bytes_per_s(const HardwareProfile& profile) {
  return profile.host_link.measured_bidirectional_device_to_host_bytes_per_s.value_or(
      device_to_host_bytes_per_s(profile));
}

std::optional<double> peak_dense_flops_per_s(const HardwareProfile& profile, DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return profile.gpu.bf16_dense_flops_per_s;
    case DType::kFP16:
      return profile.gpu.fp16_dense_flops_per_s.value_or(profile.gpu.bf16_dense_flops_per_s);
    case DType::kFP32:
      return profile.gpu.fp32_flops_per_s;
  }
  return std::nullopt;
}

}  // namespace prefetchlab::core
