#pragma once
// The "device malloc" under the caching allocator: cudaMalloc/cudaFree (or cuMemCreate for the
// pages of an expandable segment) as an abstract interface, plus a fixed-capacity model of it.
#include <cstdint>
#include <optional>

namespace prefetchlab::core {

using DeviceAddress = std::uint64_t;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // cudaMalloc: nullopt when the device cannot provide `size_bytes` more.
  virtual std::optional<DeviceAddress> device_malloc(std::uint64_t size_bytes) = 0;
  // cudaFree of exactly what device_malloc returned.
  virtual void device_free(DeviceAddress address, std::uint64_t size_bytes) = 0;
  // Total device memory (cudaMemGetInfo's total).
  virtual std::uint64_t capacity_bytes() const = 0;
  // Bytes currently held through device_malloc.
  virtual std::uint64_t used_bytes() const = 0;
  // Bytes of the device the process holds outside this allocator (the CUDA context, NCCL's
  // buffers, library workspaces): neither free nor the allocator's.
  virtual std::uint64_t held_elsewhere_bytes() const { return 0; }
};

// Device memory of N bytes, of which `held_elsewhere_bytes` are taken before the allocator starts.
// A device_malloc fails when held elsewhere + used + size would exceed the capacity (no
// fragmentation of physical memory is modelled: the driver can always remap). Addresses are
// handed out by a bump pointer and never reused, so they are unique and deterministic.
class FixedCapacityDeviceMemory final : public DeviceMemory {
 public:
  static constexpr DeviceAddress kBaseAddress = 0x7f0000000000ULL;

  explicit FixedCapacityDeviceMemory(std::uint64_t capacity_bytes, std::uint64_t held_elsewhere_bytes = 0);

  std::optional<DeviceAddress> device_malloc(std::uint64_t size_bytes) override;
  void device_free(DeviceAddress address, std::uint64_t size_bytes) override;
  std::uint64_t capacity_bytes() const override { return capacity_bytes_; }
  std::uint64_t used_bytes() const override { return used_bytes_; }
  std::uint64_t held_elsewhere_bytes() const override { return held_elsewhere_bytes_; }

  std::uint64_t malloc_calls() const { return malloc_calls_; }
  std::uint64_t free_calls() const { return free_calls_; }

 private:
  std::uint64_t capacity_bytes_;
  std::uint64_t held_elsewhere_bytes_;
  std::uint64_t used_bytes_ = 0;
  DeviceAddress next_address_ = kBaseAddress;
  std::uint64_t malloc_calls_ = 0;
  std::uint64_t free_calls_ = 0;
};

}  // namespace prefetchlab::core
