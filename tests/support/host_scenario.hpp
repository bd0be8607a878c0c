#pragma once
// The tiny host scenario the executor's tests run (scenarios/host/tiny-llama-host.yaml) on
// `world` ranks, and a host device group's options for it.
#include <chrono>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/host/host_device.hpp"

namespace prefetchlab::testing {

inline core::Scenario host_scenario(int world, std::vector<std::string> overrides = {}) {
  overrides.push_back("cluster.gpus_per_node=" + std::to_string(world));
  overrides.push_back("output.trace=false");
  return core::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-host.yaml", overrides,
                             core::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

inline gpu::HostDeviceOptions host_device_options(const core::Scenario& s,
                                                  std::chrono::milliseconds collective_timeout = std::chrono::milliseconds(20'000)) {
  gpu::HostDeviceOptions o;
  o.world_size = static_cast<int>(s.cluster.world_size());
  o.capacity_bytes = static_cast<std::uint64_t>(s.cluster.hardware.gpu.memory_bytes);
  o.allocator = s.memory.allocator;
  o.collective_timeout = collective_timeout;
  return o;
}

}  // namespace prefetchlab::testing
