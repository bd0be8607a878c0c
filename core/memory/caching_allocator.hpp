#pragma once
// A replica of PyTorch's CUDA caching allocator (native backend, c10/cuda/CUDACachingAllocator.cpp)
// over an abstract device malloc, so that simulated memory is comparable byte for byte with what
// torch.cuda.memory_stats() reports. Facts: pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp,
// c10/core/AllocatorConfig.cpp and docs/source/notes/cuda.rst ("Memory management").
//
// Rules replicated (each in its own words in caching_allocator.cpp):
//  * requests are rounded (512 B, or roundup_power2_divisions); <= 1 MiB goes to the small pool;
//  * a new segment is 2 MiB (small), 20 MiB (< 10 MiB), else the request rounded up to 2 MiB;
//  * best fit among cached free blocks of the *same stream*, ordered by (stream, size, address);
//  * split: small pool when >= 512 B remain, large pool when the request is < max_split_size
//    and > 1 MiB remains; merge free neighbours on free;
//  * a block recorded on other streams is freed only when those streams pass the point of free;
//  * on device-malloc failure: release oversize cached blocks (max_split_size), then wait for all
//    streams, release every cached whole segment and retry (num_alloc_retries), then OOM.
//
// Streams and simulated time. PyTorch records a CUDA event on every stream a block was used on
// (record_stream) when the block is freed, and treats the block as free once those events have
// completed, checked at the start of each malloc. Here a stream's progress is a number that only
// grows (`StreamPoint`), chosen by the caller: e.g. the count of operations enqueued on the stream
// (then "completed" = count of operations finished), or simulated nanoseconds. The caller reports
//   note_enqueued(S, P)   work enqueued on S so far ends at point P (what cudaEventRecord captures),
//   note_completed(S, P)  S has executed everything up to point P (cudaEventQuery succeeds).
// free() of a block used on stream S records an event at S's enqueued point; the event completes
// once S's completed point reaches it. As in PyTorch, completed events are only acted on by
// process_events(), which malloc() runs first; process_events(points) reports and processes at
// once. empty_cache() and the out-of-memory retry wait for every stream
// (mark_streams_synchronized(), counted in num_sync_all_streams), as cudaDeviceSynchronize would:
// a simulator should charge that wait.
//
// Where this differs from PyTorch, and why:
//  * No free-memory callbacks (the step between the pool search and cudaMalloc): a simulator has
//    none registered. No CUDA-graph private pools.
//  * garbage_collection_threshold acts only when per_process_memory_fraction is set, exactly as in
//    PyTorch (its set_fraction guard); the fraction is therefore an option here.
//  * malloc(0) is rounded to 512 B like any tiny request (DeviceCachingAllocator::malloc);
//    torch's allocate(0) returns a null pointer without calling it.
//  * The max_split_size release path releases only blocks that are whole segments (PyTorch
//    assumes so; splits always leave tails below max_split_size, so this never differs).
//  * Expandable segments: pages are device_malloc'd one by one (cuMemCreate); the `segment` stat
//    does not count them (PyTorch's map_block only grows reserved_bytes); a range whose pages are
//    all unmapped is given back. No IPC / peer access.
//  * FixedCapacityDeviceMemory models no physical fragmentation: a cudaMalloc succeeds whenever
//    the total fits.
#include <array>
#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/memory/allocator_options.hpp"
#include "core/memory/device_memory.hpp"
#include "core/memory/memory_stats.hpp"

namespace prefetchlab::core {

using StreamId = std::uint32_t;
using StreamPoint = std::uint64_t;

struct StreamProgress {
  StreamId stream = 0;
  StreamPoint point = 0;
};

// An allocated block. Invalid after free().
struct BlockHandle {
  std::uint32_t index = UINT32_MAX;
  std::uint32_t generation = 0;
  friend bool operator==(const BlockHandle&, const BlockHandle&) = default;
};

struct BlockInfo {
  DeviceAddress address = 0;
  std::uint64_t size_bytes = 0;       // what allocated_bytes counts
  std::uint64_t requested_bytes = 0;  // what the caller asked for
  StreamId stream = 0;                // allocation stream
  bool small_pool = false;
  DeviceAddress segment_address = 0;
};

// Why a malloc failed, with the numbers PyTorch's OutOfMemoryError message gives.
struct OutOfMemory {
  std::uint64_t requested_bytes = 0;   // as asked
  std::uint64_t rounded_bytes = 0;     // after rounding
  std::uint64_t segment_bytes = 0;     // the device malloc that failed
  StreamId stream = 0;
  std::uint64_t allocated_bytes = 0;   // allocated_bytes.all.current at failure
  std::uint64_t reserved_bytes = 0;    // reserved_bytes.all.current at failure
  std::uint64_t device_capacity_bytes = 0;
  std::uint64_t device_free_bytes = 0;
  std::optional<std::uint64_t> allowed_bytes;  // per_process_memory_fraction × capacity
  std::string message() const;
};

struct MallocResult {
  std::optional<BlockHandle> block;
  std::optional<OutOfMemory> oom;
  bool ok() const { return block.has_value(); }
  explicit operator bool() const { return ok(); }
};

// torch.cuda.memory_snapshot()-like view, for tests and reports.
enum class BlockState { kAllocated, kPendingFree, kFree, kUnmapped };
struct BlockSnapshot {
  DeviceAddress address = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t requested_bytes = 0;
  BlockState state = BlockState::kFree;
};
struct SegmentSnapshot {
  DeviceAddress address = 0;
  std::uint64_t total_bytes = 0;   // device bytes held (mapped bytes for an expandable segment)
  std::uint64_t virtual_bytes = 0; // address range (== total_bytes unless expandable)
  StreamId stream = 0;
  bool small_pool = false;
  bool expandable = false;
  std::vector<BlockSnapshot> blocks;  // in address order, tiling the range
};

// PyTorch's round_size with these options.
std::uint64_t round_allocation_size(std::uint64_t size_bytes, const AllocatorOptions& options);
// PyTorch's get_allocation_size: the segment a rounded request would get.
std::uint64_t segment_size_for(std::uint64_t rounded_bytes);

class CachingAllocator {
 public:
  // `device` must outlive the allocator. Options are fixed for its lifetime.
  explicit CachingAllocator(DeviceMemory& device, AllocatorOptions options = {});
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  // Never throws for lack of memory: the result carries OutOfMemory instead. size 0 is allowed
  // (PyTorch rounds it to 512 B like any tiny request).
  MallocResult malloc(std::uint64_t size_bytes, StreamId stream);
  // Frees now, or (after record_stream) once every recorded stream passes its enqueued point.
  void free(BlockHandle handle);
  // The block is used on `stream` too; ignored when `stream` is its allocation stream.
  void record_stream(BlockHandle handle, StreamId stream);

  void note_enqueued(StreamId stream, StreamPoint point);
  void note_completed(StreamId stream, StreamPoint point);  // lower than known: ignored
  // Frees every block whose events have all completed (PyTorch's process_events).
  void process_events();
  void process_events(std::span<const StreamProgress> completed);
  // Every stream has finished everything enqueued: all pending frees happen now.
  void mark_streams_synchronized();
  // torch.cuda.empty_cache(): waits for all streams, releases every cached whole segment (and the
  // unused pages of expandable segments).
  void empty_cache();

  BlockInfo info(BlockHandle handle) const;
  bool is_live(BlockHandle handle) const;
  const MemoryStats& stats() const { return stats_; }
  void reset_peak_stats() { stats_.reset_peak(); }
  const AllocatorOptions& options() const { return options_; }
  std::size_t pending_free_blocks() const;  // freed, waiting on stream events
  std::vector<SegmentSnapshot> snapshot() const;
  // Empty when every structural and statistical invariant holds; otherwise what is wrong.
  std::vector<std::string> check_invariants() const;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Block;
  struct Segment;
  struct Pool;
  struct Event {
    StreamPoint point;
    std::uint32_t block;
  };
  // Indexed by stream id: ids are small dense indices (the simulator's three streams, the CUDA
  // device's created streams), and the allocator looks a stream up on every malloc. The event
  // queue of a stream stays allocated while empty, so a stream whose frees come and go does not
  // rebuild its queue each time.
  static constexpr StreamId kMaxStreams = 1024;
  struct StreamState {
    StreamPoint enqueued = 0;
    StreamPoint completed = 0;
    std::deque<Event> events;  // pending block events, in the order they were recorded
  };
  // Plain structs rather than std::tuple: a tuple is not trivially copyable, so the pools'
  // sorted vectors would shift it element by element instead of with one memmove.
  // (stream, size, address, index): PyTorch's BlockComparatorSize, ties by address.
  struct SizeKey {
    StreamId stream;
    std::uint64_t size;
    DeviceAddress address;
    std::uint32_t block;
    friend auto operator<=>(const SizeKey&, const SizeKey&) = default;
  };
  // (stream, address, index): the unmapped ranges of expandable segments.
  struct AddressKey {
    StreamId stream;
    DeviceAddress address;
    std::uint32_t block;
    friend auto operator<=>(const AddressKey&, const AddressKey&) = default;
  };

  struct Request {
    std::uint64_t orig_bytes;
    std::uint64_t size_bytes;   // rounded
    std::uint64_t alloc_bytes;  // segment size for a new cudaMalloc
    StreamId stream;
    bool small;
    std::uint32_t block = kNone;
  };

  Pool& pool_of(bool small);
  std::uint32_t new_block();
  void delete_block(std::uint32_t index);
  void pool_insert(std::uint32_t index);
  void unmapped_insert(std::uint32_t index);
  void pool_erase(std::uint32_t index);
  bool is_expandable(std::uint32_t index) const;
  void delete_segment(std::uint32_t index);
  void set_head_if_first(std::uint32_t index);
  Block& checked(BlockHandle handle);
  const Block& checked(BlockHandle handle) const;
  bool is_split(const Block& b) const;
  bool free_and_idle(std::uint32_t index) const;
  bool gc_enabled() const;
  std::optional<std::uint64_t> allowed_bytes() const;
  std::uint64_t reserved_total() const;

  bool get_free_block(Request& r);
  bool alloc_block(Request& r, bool is_retry);
  bool release_available_cached_blocks(const Request& r);
  void release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(std::uint32_t index);
  void garbage_collect_cached_blocks();
  bool should_split(const Block& b, std::uint64_t size) const;
  BlockHandle alloc_found_block(Request& r);
  void free_block(std::uint32_t index);
  std::uint64_t try_merge(std::uint32_t dst, std::uint32_t src);
  void insert_events(std::uint32_t index);

  // Expandable segments.
  std::uint32_t try_allocate_expandable_block(const Request& r);
  std::uint32_t find_expandable_block(const Request& r);
  bool map_block(std::uint32_t index, std::uint64_t size);
  void unmap_block(std::uint32_t index);

  DeviceMemory& device_;
  AllocatorOptions options_;
  MemoryStats stats_;
  std::vector<Block> blocks_;
  std::vector<std::uint32_t> free_block_slots_;
  std::vector<Segment> segments_;
  std::vector<std::uint32_t> free_segment_slots_;
  std::array<std::unique_ptr<Pool>, 2> pools_;  // [0] small, [1] large
  StreamState& stream_state(StreamId stream) {
    return stream < streams_.size() ? streams_[stream] : add_stream(stream);
  }
  StreamState& add_stream(StreamId stream);  // grows streams_ to hold `stream`
  std::vector<StreamState> streams_;  // [stream id]
  DeviceAddress next_virtual_address_;
};

}  // namespace prefetchlab::core
