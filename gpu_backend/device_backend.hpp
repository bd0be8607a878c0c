#pragma once
// Which device a real run uses (`--backend host|cuda` of validate and calibrate) and how its
// group is made: one place that knows whether the CUDA + NCCL device was built.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/memory/allocator_options.hpp"
#include "gpu_backend/device/backend_unavailable.hpp"
#include "gpu_backend/device/device_group.hpp"
#include "gpu_backend/process/process_transport.hpp"

namespace prefetchlab::gpu {

enum class Backend { kHost, kCuda };

const char* backend_name(Backend backend);
// "host" or "cuda"; nullopt for anything else.
std::optional<Backend> parse_backend(std::string_view name);

// True when this binary was built with the CUDA + NCCL device (gpu_backend/CMakeLists.txt).
bool cuda_backend_built();

struct DeviceGroupOptions {
  int world_size = 1;
  std::uint64_t capacity_bytes = 80ULL << 30;  // the modelled GPU's memory (host device only)
  core::AllocatorOptions allocator;
  std::chrono::milliseconds collective_timeout{60'000};
  // Set: the ranks are processes (`--launcher env`); the group holds this process's rank only
  // and world_size is the link's.
  ProcessLink* process = nullptr;
  // The host device's data path between processes (gpu_backend/process/process_transport.hpp).
  host::ProcessDataPath process_data = host::ProcessDataPath::kAuto;
};

std::unique_ptr<DeviceGroup> make_device_group(Backend backend, const DeviceGroupOptions& options);

}  // namespace prefetchlab::gpu
