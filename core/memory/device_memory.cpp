#include <algorithm>

#include "core/memory/device_memory.hpp"

#include <stdexcept>

namespace prefetchlab::core {

FixedCapacityDeviceMemory::FixedCapacityDeviceMemory(std::uint64_t capacity_bytes, std::uint64_t held_elsewhere_bytes)
    : capacity_bytes_(capacity_bytes), held_elsewhere_bytes_(std::min(held_elsewhere_bytes, capacity_bytes)) {}

std::optional<DeviceAddress> FixedCapacityDeviceMemory::device_malloc(std::uint64_t size_bytes) {
  ++malloc_calls_;
  if (size_bytes > capacity_bytes_ - held_elsewhere_bytes_ - used_bytes_) return std::nullopt;
  used_bytes_ += size_bytes;
  const DeviceAddress address = next_address_;
  // Keep every address 512-byte aligned like cudaMalloc's (which aligns to at least 256 B).
  next_address_ += (size_bytes + 511) / 512 * 512;
  return address;
}

void FixedCapacityDeviceMemory::device_free(DeviceAddress /*address*/, std::uint64_t size_bytes) {
  if (size_bytes > used_bytes_) throw std::logic_error("device_free of more than is in use");
  ++free_calls_;
  used_bytes_ -= size_bytes;
}

}  // namespace prefetchlab::core
