#include "gpu_backend/host/host_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpu_backend/device/fused_kernel_checks.hpp"
#include "gpu_backend/device/host_kernels.hpp"
#include "gpu_backend/device/host_layer_kernels.hpp"
#include "gpu_backend/process/process_transport.hpp"
#include "gpu_backend/host/rendezvous.hpp"

namespace prefetchlab::gpu {
namespace {

constexpr std::uint64_t kPageBytes = 4096;

}  // namespace

HostDeviceMemory::~HostDeviceMemory() {
  release_deferred();
  for (const core::DeviceAddress address : live_) std::free(reinterpret_cast<void*>(address));
}

std::optional<core::DeviceAddress> HostDeviceMemory::device_malloc(std::uint64_t size_bytes) {
  if (used_bytes_ + size_bytes > capacity_bytes_) return std::nullopt;
  const std::uint64_t rounded = (size_bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  void* memory = std::aligned_alloc(kPageBytes, rounded);
  if (!memory) return std::nullopt;
  used_bytes_ += size_bytes;
  const auto address = reinterpret_cast<core::DeviceAddress>(memory);
  live_.insert(address);
  return address;
}

void HostDeviceMemory::device_free(core::DeviceAddress address, std::uint64_t size_bytes) {
  used_bytes_ -= size_bytes;
  live_.erase(address);
  deferred_.emplace_back(address, size_bytes);
}

void HostDeviceMemory::release_deferred() {
  for (const auto& [address, bytes] : deferred_) std::free(reinterpret_cast<void*>(address));
  deferred_.clear();
}

HostDevice::HostDevice(int rank, HostDeviceGroup& group, const HostDeviceOptions& options)
    : rank_(rank), group_(group), memory_(options.capacity_bytes), allocator_(memory_, options.allocator) {
  if (options.allocator.expandable_segments) {
    // The allocator maps expandable segments at virtual addresses of its own.
    throw std::invalid_argument("the host device does not support expandable_segments");
  }
}

HostDevice::~HostDevice() {
  streams_.clear();  // joins the workers before memory goes
  allocator_.mark_streams_synchronized();
  allocator_.empty_cache();
  memory_.release_deferred();
}

int HostDevice::world_size() const { return group_.world_size(); }

host::StreamWorker& HostDevice::stream(StreamId id) {
  if (id >= streams_.size()) throw std::out_of_range("no stream " + std::to_string(id) + " on rank " + std::to_string(rank_));
  return *streams_[id];
}

StreamId HostDevice::create_stream(std::string_view name) {
  streams_.push_back(std::make_unique<host::StreamWorker>(rank_, std::string(name), group_.failure_state()));
  return static_cast<StreamId>(streams_.size() - 1);
}

EventId HostDevice::record(StreamId id) {
  group_.failure_state().throw_if_failed();
  EventId event = 0;
  {
    std::lock_guard lock(events_mutex_);
    event = static_cast<EventId>(events_.size());
    events_.emplace_back();
  }
  stream(id).push("event record", [this, event] {
    std::lock_guard lock(events_mutex_);
    EventState& state = events_[static_cast<std::size_t>(event)];
    state.time_ns = group_.now_ns();
    state.done = true;
    for (const EventWaiter& waiter : waiters_) {
      if (waiter.event == event) waiter.wake->notify_one();
    }
  });
  return event;
}

void HostDevice::wait_for_event(EventId event) {
  std::unique_lock lock(events_mutex_);
  if (event < 0 || static_cast<std::size_t>(event) >= events_.size()) {
    throw std::out_of_range("no event " + std::to_string(event) + " on rank " + std::to_string(rank_));
  }
  if (events_[static_cast<std::size_t>(event)].done) return;
  // A thread waits for one event at a time, so its own condition variable serves every device.
  thread_local std::condition_variable wake;
  waiters_.push_back({event, &wake});
  const auto forget = [&] {
    waiters_.erase(std::find_if(waiters_.begin(), waiters_.end(), [&](const EventWaiter& w) { return w.wake == &wake; }));
  };
  while (!events_[static_cast<std::size_t>(event)].done) {
    if (group_.failure_state().failed()) {
      forget();
      group_.failure_state().throw_if_failed();
    }
    wake.wait_for(lock, FailureState::kPollInterval);
  }
  forget();
}

void HostDevice::wait(StreamId id, EventId event) {
  group_.failure_state().throw_if_failed();
  stream(id).push("wait for event " + std::to_string(event), [this, event] { wait_for_event(event); });
}

bool HostDevice::query(EventId event) {
  std::lock_guard lock(events_mutex_);
  return events_.at(static_cast<std::size_t>(event)).done;
}

void HostDevice::synchronize(EventId event) { wait_for_event(event); }

void HostDevice::synchronize_all() {
  std::vector<EventId> ends;
  for (StreamId id = 0; id < streams_.size(); ++id) ends.push_back(record(id));
  for (const EventId event : ends) wait_for_event(event);
}

std::int64_t HostDevice::elapsed_ns(EventId from, EventId to) {
  std::lock_guard lock(events_mutex_);
  const EventState& a = events_.at(static_cast<std::size_t>(from));
  const EventState& b = events_.at(static_cast<std::size_t>(to));
  if (!a.done || !b.done) throw std::logic_error("elapsed_ns on an event that has not completed");
  return b.time_ns - a.time_ns;
}

void HostDevice::note_streams_enqueued() {
  for (StreamId id = 0; id < streams_.size(); ++id) allocator_.note_enqueued(id, streams_[id]->enqueued());
}

std::optional<DeviceBuffer> HostDevice::allocate(std::uint64_t bytes, StreamId id) {
  group_.failure_state().throw_if_failed();
  stream(id);  // must exist
  for (StreamId s = 0; s < streams_.size(); ++s) allocator_.note_completed(s, streams_[s]->completed());
  const std::int64_t syncs_before = allocator_.stats().num_sync_all_streams;
  core::MallocResult result = allocator_.malloc(bytes, id);
  if (memory_.has_deferred_frees()) {
    // The allocator released cached segments. After its out-of-memory retry it assumed every
    // stream idle (cudaDeviceSynchronize): make that true before the memory goes back and
    // before anything new can run in the block it returns.
    if (allocator_.stats().num_sync_all_streams != syncs_before) synchronize_all();
    memory_.release_deferred();
  }
  if (!result) {
    last_oom_ = result.oom;
    return std::nullopt;
  }
  const core::BlockInfo info = allocator_.info(*result.block);
  return DeviceBuffer{*result.block, DeviceSpan{info.address, bytes}, id};
}

void HostDevice::free(const DeviceBuffer& buffer) {
  note_streams_enqueued();
  allocator_.free(buffer.block);
}

void HostDevice::record_stream(const DeviceBuffer& buffer, StreamId id) {
  stream(id);
  allocator_.record_stream(buffer.block, id);
}

void HostDevice::copy_host_to_device(StreamId id, DeviceSpan dst, const void* host) {
  group_.failure_state().throw_if_failed();
  stream(id).push("host-to-device copy of " + std::to_string(dst.bytes) + " bytes",
                  [dst, host] { std::memcpy(host::pointer(dst), host, dst.bytes); });
}

void HostDevice::copy_device_to_host(StreamId id, void* host, DeviceSpan src) {
  group_.failure_state().throw_if_failed();
  stream(id).push("device-to-host copy of " + std::to_string(src.bytes) + " bytes",
                  [src, host] { std::memcpy(host, host::pointer(src), src.bytes); });
}

void HostDevice::copy_device_to_device(StreamId id, DeviceSpan dst, DeviceSpan src) {
  group_.failure_state().throw_if_failed();
  if (dst.bytes != src.bytes) throw std::invalid_argument("device copy between spans of different sizes");
  stream(id).push("device copy of " + std::to_string(src.bytes) + " bytes",
                  [dst, src] { std::memmove(host::pointer(dst), host::pointer(src), src.bytes); });
}

void HostDevice::enqueue_collective(StreamId id, host::CollectiveCall call) {
  group_.failure_state().throw_if_failed();
  call.seq = collective_seq_++;
  const std::string what = call.describe();
  stream(id).push(what, [this, call] { group_.transport().run(rank_, call); });
}

void HostDevice::all_gather(StreamId id, DeviceSpan send, DeviceSpan recv, ElementType type) {
  if (recv.bytes != send.bytes * static_cast<std::uint64_t>(world_size())) {
    throw std::invalid_argument("all_gather: the output must hold world_size slots of the input");
  }
  enqueue_collective(id, host::CollectiveCall{host::CollectiveKind::kAllGather, send, recv, type, ReduceOp::kSum, 0});
}

void HostDevice::reduce_scatter(StreamId id, DeviceSpan send, DeviceSpan recv, ElementType type, ReduceOp op) {
  if (send.bytes != recv.bytes * static_cast<std::uint64_t>(world_size())) {
    throw std::invalid_argument("reduce_scatter: the input must hold world_size slots of the output");
  }
  enqueue_collective(id, host::CollectiveCall{host::CollectiveKind::kReduceScatter, send, recv, type, op, 0});
}

void HostDevice::all_reduce(StreamId id, DeviceSpan buffer, ElementType type, ReduceOp op) {
  enqueue_collective(id, host::CollectiveCall{host::CollectiveKind::kAllReduce, buffer, buffer, type, op, 0});
}

void HostDevice::gemm(StreamId id, const GemmArgs& args) {
  group_.failure_state().throw_if_failed();
  stream(id).push("gemm " + std::to_string(args.m) + "x" + std::to_string(args.n) + "x" + std::to_string(args.k),
                  [args] { host::run_gemm(args); });
}

void HostDevice::elementwise(StreamId id, const ElementwiseArgs& args) {
  group_.failure_state().throw_if_failed();
  stream(id).push("elementwise kernel over " + std::to_string(args.numel) + " elements",
                  [args] { host::run_elementwise(args); });
}

void HostDevice::adam(StreamId id, const AdamArgs& args) {
  group_.failure_state().throw_if_failed();
  check_args(std::vector<AdamArgs>{args});  // the CUDA device's checks, so CI sees what a GPU would refuse
  stream(id).push("adam over " + std::to_string(args.numel) + " elements", [args] { host::run_adam(args); });
}

void* HostDevice::allocate_pinned_host(std::uint64_t bytes) {
  constexpr std::uint64_t kAlign = 64;
  return std::aligned_alloc(kAlign, std::max<std::uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
}

void HostDevice::free_pinned_host(void* host) { std::free(host); }

void HostDevice::multi_tensor_adam(StreamId id, const std::vector<AdamArgs>& tensors) {
  group_.failure_state().throw_if_failed();
  check_args(tensors);  // at the call, as a CUDA launch would fail
  stream(id).push("multi-tensor adam over " + std::to_string(tensors.size()) + " tensors",
                  [tensors] { host::run_multi_tensor_adam(tensors); });
}

void HostDevice::bias_activation(StreamId id, const BiasActivationArgs& args) {
  group_.failure_state().throw_if_failed();
  check_args(args);
  stream(id).push("bias_activation " + std::to_string(args.rows) + "x" + std::to_string(args.cols),
                  [args] { host::run_bias_activation(args); });
}

void HostDevice::bias_activation_backward(StreamId id, const BiasActivationBackwardArgs& args) {
  group_.failure_state().throw_if_failed();
  check_args(args);
  stream(id).push("bias_activation_backward " + std::to_string(args.rows) + "x" + std::to_string(args.cols),
                  [args] { host::run_bias_activation_backward(args); });
}

void HostDevice::layer_norm(StreamId id, const LayerNormArgs& args) {
  group_.failure_state().throw_if_failed();
  check_args(args);
  stream(id).push("layer_norm " + std::to_string(args.rows) + "x" + std::to_string(args.cols),
                  [args] { host::run_layer_norm(args); });
}

void HostDevice::layer_norm_backward(StreamId id, const LayerNormBackwardArgs& args) {
  group_.failure_state().throw_if_failed();
  check_args(args);
  stream(id).push("layer_norm_backward " + std::to_string(args.rows) + "x" + std::to_string(args.cols),
                  [args] { host::run_layer_norm_backward(args); });
}

void HostDevice::zero(StreamId id, DeviceSpan span) {
  group_.failure_state().throw_if_failed();
  stream(id).push("memset of " + std::to_string(span.bytes) + " bytes",
                  [span] { std::memset(host::pointer(span), 0, span.bytes); });
}

HostDeviceGroup::HostDeviceGroup(const HostDeviceOptions& options)
    : world_size_(options.process ? options.process->world_size() : options.world_size),
      process_(options.process),
      epoch_(std::chrono::steady_clock::now()) {
  if (world_size_ < 1) throw std::invalid_argument("a device group needs at least one rank");
  if (process_) {
    transport_ = std::make_unique<host::ProcessTransport>(*process_, options.process_data);
    first_local_rank_ = process_->rank();
    devices_.push_back(std::make_unique<HostDevice>(first_local_rank_, *this, options));
    // A failure here (a rank thread's or a stream worker's) reaches every other process; one
    // there reaches this group through the link.
    process_->attach(failure_);
  } else {
    transport_ = std::make_unique<host::Rendezvous>(world_size_, options.collective_timeout, failure_);
    for (int r = 0; r < world_size_; ++r) devices_.push_back(std::make_unique<HostDevice>(r, *this, options));
  }
}

HostDeviceGroup::~HostDeviceGroup() {
  if (process_) process_->detach();
  // Every rank's stream workers stop before any rank's memory goes: after a failure one rank's
  // worker leaves a collective at once while another's may still be reading the first rank's
  // buffers in it (a SEGV under TSan on a loaded machine, in Rendezvous::run's reduction).
  for (auto& device : devices_) device->join_streams();
  devices_.clear();
}

Device& HostDeviceGroup::device(int rank) {
  const int at = rank - first_local_rank_;
  if (at < 0 || at >= static_cast<int>(devices_.size())) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is not on this process (its rank is " +
                            std::to_string(first_local_rank_) + ")");
  }
  return *devices_[static_cast<std::size_t>(at)];
}

void HostDeviceGroup::abort(const RankFailure& failure) { failure_.abort(failure); }

int HostDeviceGroup::process_rank() const { return process_ ? process_->rank() : -1; }

std::int64_t HostDeviceGroup::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch_).count();
}

}  // namespace prefetchlab::gpu
