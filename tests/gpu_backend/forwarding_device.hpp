#pragma once
// Test decorators for gpu::Device / gpu::DeviceGroup: forward every call to a real device, so a
// test can count what the executor does (host synchronisations) or inject faults on one rank.
#include <atomic>
#include <memory>
#include <vector>

#include "gpu_backend/device/device_group.hpp"

namespace prefetchlab::testing {

class ForwardingDevice : public gpu::Device {
 public:
  explicit ForwardingDevice(gpu::Device& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  gpu::StreamId create_stream(std::string_view name) override { return inner_.create_stream(name); }
  gpu::EventId record(gpu::StreamId s) override { return inner_.record(s); }
  void wait(gpu::StreamId s, gpu::EventId e) override { inner_.wait(s, e); }
  bool query(gpu::EventId e) override { return inner_.query(e); }
  void synchronize(gpu::EventId e) override { inner_.synchronize(e); }
  void synchronize_all() override { inner_.synchronize_all(); }
  std::int64_t elapsed_ns(gpu::EventId a, gpu::EventId b) override { return inner_.elapsed_ns(a, b); }
  std::optional<gpu::DeviceBuffer> allocate(std::uint64_t bytes, gpu::StreamId s) override { return inner_.allocate(bytes, s); }
  void free(const gpu::DeviceBuffer& b) override { inner_.free(b); }
  void record_stream(const gpu::DeviceBuffer& b, gpu::StreamId s) override { inner_.record_stream(b, s); }
  const core::MemoryStats& memory_stats() override { return inner_.memory_stats(); }
  void reset_peak_memory_stats() override { inner_.reset_peak_memory_stats(); }
  std::optional<core::OutOfMemory> last_out_of_memory() const override { return inner_.last_out_of_memory(); }
  void copy_host_to_device(gpu::StreamId s, gpu::DeviceSpan d, const void* h) override { inner_.copy_host_to_device(s, d, h); }
  void copy_device_to_host(gpu::StreamId s, void* h, gpu::DeviceSpan d) override { inner_.copy_device_to_host(s, h, d); }
  void copy_device_to_device(gpu::StreamId s, gpu::DeviceSpan d, gpu::DeviceSpan src) override {
    inner_.copy_device_to_device(s, d, src);
  }
  void pin_host_memory(void* h, std::uint64_t bytes) override { inner_.pin_host_memory(h, bytes); }
  void unpin_host_memory(void* h) override { inner_.unpin_host_memory(h); }
  void* allocate_pinned_host(std::uint64_t bytes) override { return inner_.allocate_pinned_host(bytes); }
  void free_pinned_host(void* h) override { inner_.free_pinned_host(h); }
  void all_gather(gpu::StreamId s, gpu::DeviceSpan send, gpu::DeviceSpan recv, gpu::ElementType t) override {
    inner_.all_gather(s, send, recv, t);
  }
  void reduce_scatter(gpu::StreamId s, gpu::DeviceSpan send, gpu::DeviceSpan recv, gpu::ElementType t,
                      gpu::ReduceOp op) override {
    inner_.reduce_scatter(s, send, recv, t, op);
  }
  void all_reduce(gpu::StreamId s, gpu::DeviceSpan b, gpu::ElementType t, gpu::ReduceOp op) override {
    inner_.all_reduce(s, b, t, op);
  }
  void gemm(gpu::StreamId s, const gpu::GemmArgs& a) override { inner_.gemm(s, a); }
  void elementwise(gpu::StreamId s, const gpu::ElementwiseArgs& a) override { inner_.elementwise(s, a); }
  void adam(gpu::StreamId s, const gpu::AdamArgs& a) override { inner_.adam(s, a); }
  void multi_tensor_adam(gpu::StreamId s, const std::vector<gpu::AdamArgs>& t) override { inner_.multi_tensor_adam(s, t); }
  void bias_activation(gpu::StreamId s, const gpu::BiasActivationArgs& a) override { inner_.bias_activation(s, a); }
  void bias_activation_backward(gpu::StreamId s, const gpu::BiasActivationBackwardArgs& a) override {
    inner_.bias_activation_backward(s, a);
  }
  void layer_norm(gpu::StreamId s, const gpu::LayerNormArgs& a) override { inner_.layer_norm(s, a); }
  void layer_norm_backward(gpu::StreamId s, const gpu::LayerNormBackwardArgs& a) override { inner_.layer_norm_backward(s, a); }
  void zero(gpu::StreamId s, gpu::DeviceSpan d) override { inner_.zero(s, d); }

 protected:
  gpu::Device& inner_;
};

// A group whose devices are made by `wrap(inner device)`.
template <class Wrapped>
class WrappingGroup : public gpu::DeviceGroup {
 public:
  template <class Make>
  WrappingGroup(gpu::DeviceGroup& inner, Make make) : inner_(inner) {
    for (int r = 0; r < inner.world_size(); ++r) devices_.push_back(make(inner.device(r)));
  }
  int world_size() const override { return inner_.world_size(); }
  gpu::Device& device(int rank) override { return *devices_.at(static_cast<std::size_t>(rank)); }
  Wrapped& wrapped(int rank) { return *devices_.at(static_cast<std::size_t>(rank)); }
  void abort(const gpu::RankFailure& failure) override { inner_.abort(failure); }
  std::optional<gpu::RankFailure> failure() const override { return inner_.failure(); }

 private:
  gpu::DeviceGroup& inner_;
  std::vector<std::unique_ptr<Wrapped>> devices_;
};

}  // namespace prefetchlab::testing
