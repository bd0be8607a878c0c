#pragma once
// Host memory for offloaded model states (zero.offload_param / offload_optimizer, device cpu):
// page-locked memory of the device's own (Device::allocate_pinned_host: cudaHostAlloc, which is
// how PyTorch's pin_memory allocates by default: its CachingHostAllocator, unless
// PYTORCH_CUDA_ALLOC_CONF's pinned_use_cuda_host_register says otherwise) when the section's
// pin_memory is true, plain pageable memory otherwise (copies from it are synchronous on CUDA).
// Zero-filled; freed through the device that made it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu {

class HostStateBuffer {
 public:
  HostStateBuffer() = default;
  // Throws std::runtime_error when the device cannot pin `bytes`.
  HostStateBuffer(Device& device, std::uint64_t bytes, bool pinned);
  ~HostStateBuffer();
  HostStateBuffer(HostStateBuffer&& other) noexcept;
  HostStateBuffer& operator=(HostStateBuffer&& other) noexcept;
  HostStateBuffer(const HostStateBuffer&) = delete;
  HostStateBuffer& operator=(const HostStateBuffer&) = delete;

  std::byte* data() { return pinned_ ? pinned_ : pageable_.data(); }
  const std::byte* data() const { return pinned_ ? pinned_ : pageable_.data(); }
  std::uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool pinned() const { return pinned_ != nullptr; }

 private:
  void release() noexcept;

  Device* device_ = nullptr;  // the device that pinned it
  std::byte* pinned_ = nullptr;
  std::vector<std::byte> pageable_;
  std::uint64_t size_ = 0;
};

}  // namespace prefetchlab::gpu
