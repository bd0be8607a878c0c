#pragma once
// gpu::Device — one rank's accelerator as the executor sees it: memory through the PyTorch
// caching-allocator rules (core::CachingAllocator), ordered streams, events with timestamps and
// stream waits, collectives over the group's one communicator, GEMMs and memory-bound kernels,
// host<->device copies. Shaped after CUDA + NCCL (cudaStream/cudaEvent, ncclAllGather, cuBLAS),
// so that device implementation and the host-thread one (ranks are threads) fit behind it.
//
// Threading: a Device belongs to one host thread (its rank's). Every call except
// synchronize()/synchronize_all() only enqueues work and returns; work on one stream runs in
// enqueue order; streams of one device run concurrently unless ordered by events.
//
// Failures: a Device of a failed group throws gpu::RunAborted from any call that would block
// (and from enqueue calls), so every rank of a failed run stops.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory/caching_allocator.hpp"
#include "core/memory/memory_stats.hpp"
#include "gpu_backend/device/element_type.hpp"

namespace prefetchlab::gpu {

using StreamId = core::StreamId;  // the same ids key the caching allocator's per-stream pools
using EventId = std::int64_t;

// A contiguous range of device memory (a device pointer and a length; never dereferenced on
// the host by the executor).
struct DeviceSpan {
  core::DeviceAddress address = 0;
  std::uint64_t bytes = 0;
  DeviceSpan sub(std::uint64_t offset_bytes, std::uint64_t length_bytes) const;
};

// One allocation from the device's caching allocator.
struct DeviceBuffer {
  core::BlockHandle block;
  DeviceSpan span;
  StreamId stream = 0;  // the allocation stream
};

enum class ReduceOp { kSum, kMax };

// C[m x n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T. Leading dimensions
// are row strides in elements. A, B and C share one element type; accumulation is in fp32.
// batch_count > 1: that many independent GEMMs (attention's per-head products), matrix i of
// each operand starting stride_x elements after matrix i-1 (cublasGemmStridedBatchedEx; a
// stride of 0 reuses one matrix for every batch). gemm_plan.hpp checks the shapes.
struct GemmArgs {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  DeviceSpan a, b, c;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  ElementType type = ElementType::kBF16;
  std::int64_t batch_count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Memory-bound kernels: one pass over their operands (numel elements of `type`).
enum class ElementwiseOp {
  kScale,     // dst = alpha * a
  kMultiply,  // dst = a * b
  kAxpy,      // dst = dst + alpha * a
};
struct ElementwiseArgs {
  ElementwiseOp op = ElementwiseOp::kScale;
  DeviceSpan dst, a, b;
  std::int64_t numel = 0;
  float alpha = 1.0f;
  ElementType type = ElementType::kBF16;
};

// One Adam step over a partition (the optimizer's memory-bound kernel): fp32 master weights and
// moments, gradients and the updated 16-bit parameters in `param_type`.
struct AdamArgs {
  DeviceSpan params, grads, master, exp_avg, exp_avg_sq;
  std::int64_t numel = 0;
  ElementType param_type = ElementType::kBF16;
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  std::int64_t step = 1;
};

// --- a transformer layer's fused memory-bound kernels (PyTorch eager runs each as one kernel;
// row-major rows x cols operands in `type`, fp32 arithmetic) ---
enum class Activation { kIdentity, kGeluTanh };  // kGeluTanh: GPT-2's gelu_new (tanh approximation)

// dst = act(x + bias[col]) + residual: bias (cols elements) and residual (rows x cols) are
// optional (an empty span skips them). dst may alias x or residual.
struct BiasActivationArgs {
  DeviceSpan dst, x, bias, residual;
  std::int64_t rows = 0, cols = 0;
  Activation activation = Activation::kGeluTanh;
  ElementType type = ElementType::kBF16;
};

// dx = dy * act'(x + bias[col]) (the activation's backward; bias optional). dx may alias dy.
struct BiasActivationBackwardArgs {
  DeviceSpan dx, dy, x, bias;
  std::int64_t rows = 0, cols = 0;
  Activation activation = Activation::kGeluTanh;
  ElementType type = ElementType::kBF16;
};

// LayerNorm over each row: y = (x - mean) * rstd * gamma + beta (gamma, beta: cols elements of
// `type`); mean and rstd (rows fp32 each) are saved for the backward, as PyTorch does.
struct LayerNormArgs {
  DeviceSpan y, x, gamma, beta, mean, rstd;
  std::int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  ElementType type = ElementType::kBF16;
};

// LayerNorm's backward from the saved mean and rstd: dx (rows x cols), and dgamma, dbeta (cols
// elements of `type`: sums over the rows, overwritten).
struct LayerNormBackwardArgs {
  DeviceSpan dx, dgamma, dbeta, dy, x, gamma, mean, rstd;
  std::int64_t rows = 0, cols = 0;
  ElementType type = ElementType::kBF16;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // --- streams and events ---
  virtual StreamId create_stream(std::string_view name) = 0;
  // Records an event at the current end of `stream` (cudaEventRecord).
  virtual EventId record(StreamId stream) = 0;
  // `stream` waits for `event` before running later work (cudaStreamWaitEvent).
  virtual void wait(StreamId stream, EventId event) = 0;
  // True when the event has completed (cudaEventQuery); never blocks.
  virtual bool query(EventId event) = 0;
  // The host blocks until the event has completed (cudaEventSynchronize).
  virtual void synchronize(EventId event) = 0;
  // The host blocks until every stream has finished (cudaDeviceSynchronize).
  virtual void synchronize_all() = 0;
  // Nanoseconds from `from` to `to` (cudaEventElapsedTime); both must have completed.
  virtual std::int64_t elapsed_ns(EventId from, EventId to) = 0;

  // --- memory (core::CachingAllocator rules on the device's own malloc) ---
  // nullopt when out of memory; last_out_of_memory() then says what failed.
  virtual std::optional<DeviceBuffer> allocate(std::uint64_t bytes, StreamId stream) = 0;
  // Frees now, or once every stream the buffer was recorded on passes this point.
  virtual void free(const DeviceBuffer& buffer) = 0;
  virtual void record_stream(const DeviceBuffer& buffer, StreamId stream) = 0;
  virtual const core::MemoryStats& memory_stats() = 0;
  virtual void reset_peak_memory_stats() = 0;
  virtual std::optional<core::OutOfMemory> last_out_of_memory() const = 0;

  // --- copies (`host` must stay valid and unchanged until the copy has completed) ---
  virtual void copy_host_to_device(StreamId stream, DeviceSpan dst, const void* host) = 0;
  virtual void copy_device_to_host(StreamId stream, void* host, DeviceSpan src) = 0;
  virtual void copy_device_to_device(StreamId stream, DeviceSpan dst, DeviceSpan src) = 0;
  // Page-locks host memory so copies from and to it run asynchronously on the copy engine
  // (cudaHostRegister; PyTorch's pin_memory, which DeepSpeed's offload uses). Unpin before the
  // memory goes; pinning does not move or change it.
  virtual void pin_host_memory(void* host, std::uint64_t bytes) = 0;
  virtual void unpin_host_memory(void* host) = 0;
  // Page-locked host memory of the device's own (cudaHostAlloc, as PyTorch's pin_memory
  // allocates it): what offloaded model states live in (host_state_buffer.hpp). nullptr when
  // none can be had; give it back with free_pinned_host once no copy uses it.
  virtual void* allocate_pinned_host(std::uint64_t bytes) = 0;
  virtual void free_pinned_host(void* host) = 0;

  // --- collectives over the group's communicator: every rank must issue the same sequence
  // (kind, size, type), as with NCCL; a mismatch or a rank that never arrives fails the run ---
  // recv holds world_size slots of send.bytes; slot rank() may alias send (in place).
  virtual void all_gather(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type) = 0;
  // send holds world_size slots of recv.bytes; recv gets slot rank() reduced over ranks.
  virtual void reduce_scatter(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type,
                              ReduceOp op) = 0;
  virtual void all_reduce(StreamId stream, DeviceSpan buffer, ElementType type, ReduceOp op) = 0;

  // --- kernels ---
  virtual void gemm(StreamId stream, const GemmArgs& args) = 0;
  virtual void elementwise(StreamId stream, const ElementwiseArgs& args) = 0;
  virtual void adam(StreamId stream, const AdamArgs& args) = 0;
  // One Adam step over many tensors at once (apex's / PyTorch's fused multi-tensor Adam): every
  // entry is one tensor's states; all share one param_type, lr, betas, eps and step
  // (std::invalid_argument otherwise). The CUDA device runs them in few launches of fixed-size
  // chunks (adam_chunk_plan.hpp).
  virtual void multi_tensor_adam(StreamId stream, const std::vector<AdamArgs>& tensors) = 0;
  virtual void bias_activation(StreamId stream, const BiasActivationArgs& args) = 0;
  virtual void bias_activation_backward(StreamId stream, const BiasActivationBackwardArgs& args) = 0;
  virtual void layer_norm(StreamId stream, const LayerNormArgs& args) = 0;
  virtual void layer_norm_backward(StreamId stream, const LayerNormBackwardArgs& args) = 0;
  // Zero `span` (cudaMemsetAsync).
  virtual void zero(StreamId stream, DeviceSpan span) = 0;
};

}  // namespace prefetchlab::gpu
