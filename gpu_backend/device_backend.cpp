#include "gpu_backend/device_backend.hpp"

#include "gpu_backend/host/host_device.hpp"
#ifdef PREFETCHLAB_HAVE_CUDA
#include "gpu_backend/cuda/cuda_device.hpp"
#endif

namespace prefetchlab::gpu {

const char* backend_name(Backend backend) { return backend == Backend::kHost ? "host" : "cuda"; }

std::optional<Backend> parse_backend(std::string_view name) {
  if (name == "host") return Backend::kHost;
  if (name == "cuda") return Backend::kCuda;
  return std::nullopt;
}

bool cuda_backend_built() {
#ifdef PREFETCHLAB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<DeviceGroup> make_device_group(Backend backend, const DeviceGroupOptions& options) {
  if (backend == Backend::kHost) {
    HostDeviceOptions host;
    host.world_size = options.world_size;
    host.capacity_bytes = options.capacity_bytes;
    host.allocator = options.allocator;
    host.collective_timeout = options.collective_timeout;
    host.process = options.process;
    host.process_data = options.process_data;
    return std::make_unique<HostDeviceGroup>(host);
  }
#ifdef PREFETCHLAB_HAVE_CUDA
  CudaDeviceOptions cuda;
  cuda.world_size = options.world_size;
  cuda.allocator = options.allocator;
  cuda.collective_timeout = options.collective_timeout;
  cuda.process = options.process;
  return make_cuda_device_group(cuda);
#else
  throw BackendUnavailable(
      "--backend cuda: this prefetchlab was built without the CUDA + NCCL device (CMake found no CUDA "
      "toolkit or no NCCL); rebuild where both are installed (gpu_backend/gpu-check.sh does it), or use "
      "--backend host");
#endif
}

}  // namespace prefetchlab::gpu
