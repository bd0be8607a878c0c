#include "gpu_backend/device/device.hpp"

#include <stdexcept>
#include <string>

namespace prefetchlab::gpu {

DeviceSpan DeviceSpan::sub(std::uint64_t offset_bytes, std::uint64_t length_bytes) const {
  if (offset_bytes > bytes || length_bytes > bytes - offset_bytes) {
    throw std::out_of_range("device span [" + std::to_string(offset_bytes) + ", +" + std::to_string(length_bytes) +
                            ") outside a span of " + std::to_string(bytes) + " bytes");
  }
  return DeviceSpan{address + offset_bytes, length_bytes};
}

}  // namespace prefetchlab::gpu
