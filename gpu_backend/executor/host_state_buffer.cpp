#include "gpu_backend/executor/host_state_buffer.hpp"

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace prefetchlab::gpu {

HostStateBuffer::HostStateBuffer(Device& device, std::uint64_t bytes, bool pinned) : size_(bytes) {
  if (bytes == 0) return;
  if (!pinned) {
    pageable_.assign(static_cast<std::size_t>(bytes), std::byte{0});
    return;
  }
  void* memory = device.allocate_pinned_host(bytes);
  if (memory == nullptr) {
    throw std::runtime_error("could not allocate " + std::to_string(bytes) + " bytes of pinned host memory on rank " +
                             std::to_string(device.rank()) + " (set pin_memory: false to use pageable memory)");
  }
  device_ = &device;
  pinned_ = static_cast<std::byte*>(memory);
  std::memset(pinned_, 0, static_cast<std::size_t>(bytes));
}

HostStateBuffer::~HostStateBuffer() { release(); }

HostStateBuffer::HostStateBuffer(HostStateBuffer&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      pinned_(std::exchange(other.pinned_, nullptr)),
      pageable_(std::move(other.pageable_)),
      size_(std::exchange(other.size_, 0)) {}

HostStateBuffer& HostStateBuffer::operator=(HostStateBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, nullptr);
    pinned_ = std::exchange(other.pinned_, nullptr);
    pageable_ = std::move(other.pageable_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HostStateBuffer::release() noexcept {
  if (pinned_ != nullptr) {
    try {
      device_->free_pinned_host(pinned_);
    } catch (const std::exception&) {
      // A failed device: the memory goes with the process's context anyway.
    }
  }
  pinned_ = nullptr;
  device_ = nullptr;
  pageable_.clear();
  size_ = 0;
}

}  // namespace prefetchlab::gpu
