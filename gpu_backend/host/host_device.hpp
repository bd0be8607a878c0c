#pragma once
// The host-thread device (docs/architecture.md, "The real backend"): runs anywhere, so every line
// of the executor is exercised in CI without a GPU.
//   ranks     threads (the executor's), one HostDevice each; or one rank per process
//             (`--launcher env`), whose collectives go through rank 0's store
//   streams   ordered worker queues, one worker thread per stream
//   events    completion markers stamped with steady_clock when the stream reaches them
//   memory    real host memory under core::CachingAllocator, with a device capacity
//   collectives  a rendezvous per collective (gpu_backend/host/rendezvous.hpp), with a timeout
//   kernels   real Eigen GEMMs (fp32, or bf16 emulated; batched ones one by one), memory passes,
//             the fused layer kernels and chunked multi-tensor Adam (host_layer_kernels.hpp)
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <vector>

#include "core/memory/allocator_options.hpp"
#include "core/memory/caching_allocator.hpp"
#include "core/memory/device_memory.hpp"
#include "gpu_backend/device/device_group.hpp"
#include "gpu_backend/device/failure_state.hpp"
#include "gpu_backend/device/collective_transport.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/process/process_transport.hpp"
#include "gpu_backend/host/stream_worker.hpp"

namespace prefetchlab::gpu {

struct HostDeviceOptions {
  int world_size = 1;
  // What the caching allocator may hold per rank (the modelled GPU's memory). Host pages are
  // only touched when used, so a large capacity costs nothing by itself.
  std::uint64_t capacity_bytes = 80ULL << 30;
  core::AllocatorOptions allocator;
  // A rank that has not reached a collective this long after another did fails the run.
  std::chrono::milliseconds collective_timeout{60'000};
  // Set: the ranks are processes; this group holds the link's rank only (world_size is the
  // link's) and its collectives go through rank 0's store (process_transport.hpp).
  ProcessLink* process = nullptr;
  host::ProcessDataPath process_data = host::ProcessDataPath::kAuto;
};

class HostDeviceGroup;

// cudaMalloc on the host: aligned host memory, bounded by a capacity. Frees are deferred until
// the owning device knows no stream can still touch the memory (see HostDevice::allocate).
// Destroying it frees what is still allocated, as destroying a CUDA context does: a run that
// ends with buffers live (a failure, a test that keeps one) leaks nothing.
class HostDeviceMemory final : public core::DeviceMemory {
 public:
  explicit HostDeviceMemory(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  ~HostDeviceMemory() override;
  std::optional<core::DeviceAddress> device_malloc(std::uint64_t size_bytes) override;
  void device_free(core::DeviceAddress address, std::uint64_t size_bytes) override;
  std::uint64_t capacity_bytes() const override { return capacity_bytes_; }
  std::uint64_t used_bytes() const override { return used_bytes_; }
  bool has_deferred_frees() const { return !deferred_.empty(); }
  void release_deferred();

 private:
  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
  std::vector<std::pair<core::DeviceAddress, std::uint64_t>> deferred_;
  std::unordered_set<core::DeviceAddress> live_;  // allocated, not yet freed
};

class HostDevice final : public Device {
 public:
  HostDevice(int rank, HostDeviceGroup& group, const HostDeviceOptions& options);
  ~HostDevice() override;
  // Drains and joins this rank's stream workers (the group does it for every rank before any
  // rank's memory goes: another rank's worker may still be reading it inside a collective).
  void join_streams() { streams_.clear(); }

  int rank() const override { return rank_; }
  int world_size() const override;

  StreamId create_stream(std::string_view name) override;
  EventId record(StreamId stream) override;
  void wait(StreamId stream, EventId event) override;
  bool query(EventId event) override;
  void synchronize(EventId event) override;
  void synchronize_all() override;
  std::int64_t elapsed_ns(EventId from, EventId to) override;

  std::optional<DeviceBuffer> allocate(std::uint64_t bytes, StreamId stream) override;
  void free(const DeviceBuffer& buffer) override;
  void record_stream(const DeviceBuffer& buffer, StreamId stream) override;
  const core::MemoryStats& memory_stats() override { return allocator_.stats(); }
  void reset_peak_memory_stats() override { allocator_.reset_peak_stats(); }
  std::optional<core::OutOfMemory> last_out_of_memory() const override { return last_oom_; }

  void copy_host_to_device(StreamId stream, DeviceSpan dst, const void* host) override;
  void copy_device_to_host(StreamId stream, void* host, DeviceSpan src) override;
  void copy_device_to_device(StreamId stream, DeviceSpan dst, DeviceSpan src) override;
  // Device memory is host memory here: nothing to pin.
  void pin_host_memory(void*, std::uint64_t) override {}
  void unpin_host_memory(void*) override {}
  // Plain aligned host memory (there is no copy engine to page-lock it for).
  void* allocate_pinned_host(std::uint64_t bytes) override;
  void free_pinned_host(void* host) override;

  void all_gather(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type) override;
  void reduce_scatter(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type, ReduceOp op) override;
  void all_reduce(StreamId stream, DeviceSpan buffer, ElementType type, ReduceOp op) override;

  void gemm(StreamId stream, const GemmArgs& args) override;
  void elementwise(StreamId stream, const ElementwiseArgs& args) override;
  void adam(StreamId stream, const AdamArgs& args) override;
  void multi_tensor_adam(StreamId stream, const std::vector<AdamArgs>& tensors) override;
  void bias_activation(StreamId stream, const BiasActivationArgs& args) override;
  void bias_activation_backward(StreamId stream, const BiasActivationBackwardArgs& args) override;
  void layer_norm(StreamId stream, const LayerNormArgs& args) override;
  void layer_norm_backward(StreamId stream, const LayerNormBackwardArgs& args) override;
  void zero(StreamId stream, DeviceSpan span) override;

 private:
  struct EventState {
    bool done = false;
    std::int64_t time_ns = 0;
  };
  host::StreamWorker& stream(StreamId id);
  void wait_for_event(EventId event);  // blocks the calling thread (host or a stream worker)
  void enqueue_collective(StreamId stream, host::CollectiveCall call);
  void note_streams_enqueued();

  int rank_;
  HostDeviceGroup& group_;
  std::vector<std::unique_ptr<host::StreamWorker>> streams_;
  std::mutex events_mutex_;
  // Threads blocked in wait_for_event, each on its own condition variable, so that an event's
  // completion wakes only its waiters. (One shared condition variable woke every stream worker
  // and the host thread at every record: hundreds of needless context switches per rank and
  // iteration, taken from the kernels on a small machine.)
  struct EventWaiter {
    EventId event;
    std::condition_variable* wake;
  };
  std::vector<EventWaiter> waiters_;
  std::deque<EventState> events_;
  HostDeviceMemory memory_;
  core::CachingAllocator allocator_;
  std::optional<core::OutOfMemory> last_oom_;
  std::int64_t collective_seq_ = 0;
};

class HostDeviceGroup final : public DeviceGroup {
 public:
  explicit HostDeviceGroup(const HostDeviceOptions& options);
  ~HostDeviceGroup() override;

  int world_size() const override { return world_size_; }
  ProcessLink* process_link() const override { return process_; }
  int process_rank() const override;
  Device& device(int rank) override;
  // Records the failure here and, between processes, tells every other rank.
  void abort(const RankFailure& failure) override;
  std::optional<RankFailure> failure() const override { return failure_.failure(); }

  FailureState& failure_state() { return failure_; }
  host::CollectiveTransport& transport() { return *transport_; }
  std::int64_t now_ns() const;  // steady_clock since the group was made

 private:
  FailureState failure_;
  int world_size_;
  ProcessLink* process_;
  std::unique_ptr<host::CollectiveTransport> transport_;
  std::chrono::steady_clock::time_point epoch_;
  std::vector<std::unique_ptr<HostDevice>> devices_;  // the local ranks, in rank order
  int first_local_rank_ = 0;
};

}  // namespace prefetchlab::gpu
