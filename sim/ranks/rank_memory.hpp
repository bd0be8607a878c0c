#pragma once
// One GPU's memory as PyTorch sees it: the core CachingAllocator over the device's capacity,
// with one pool per stream (compute, all-gather, reduce-scatter) and cross-stream frees that
// wait until the other stream has passed the point of use (recordStream). Every simulated
// tensor of ZeRO-3 goes through here, so allocated vs reserved, fragmentation and OOM are the
// allocator's, not an estimate (PyTorch's c10/cuda/CUDACachingAllocator.cpp; what DeepSpeed
// allocates where: partition_parameters.py, stage3.py).
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/memory/caching_allocator.hpp"
#include "core/memory/device_memory.hpp"
#include "core/metrics/memory_breakdown.hpp"
#include "core/metrics/metrics.hpp"
#include "sim/ranks/device_stream.hpp"

namespace prefetchlab::sim {

class RankMemory {
 public:
  // `capacity_bytes` is what CUDA reports as the device's total (per_process_memory_fraction's
  // base, as in PyTorch); `held_elsewhere_bytes` of it the process holds outside the allocator.
  RankMemory(std::int64_t capacity_bytes, std::int64_t held_elsewhere_bytes, const core::AllocatorOptions& options,
             const Stream* const (&streams)[3], int rank, bool record_timeline);

  // nullopt = out of memory; `oom()` then says what failed. `use` tags the block for the peak's
  // breakdown (peak_breakdown()).
  std::optional<core::BlockHandle> allocate(std::int64_t bytes, StreamKind stream, TimeNs now_ns,
                                            core::MemoryUse use);
  // Frees a block used only on its allocation stream.
  void free(core::BlockHandle block, TimeNs now_ns);
  // Frees a block last used on `used_on` (recordStream): reusable once that stream passes here.
  void free_after(core::BlockHandle block, const Stream& used_on, TimeNs now_ns);

  std::int64_t allocated_bytes() const { return allocator_.stats().allocated_bytes.all.current; }
  std::int64_t reserved_bytes() const { return allocator_.stats().reserved_bytes.all.current; }
  std::int64_t peak_allocated_bytes() const { return allocator_.stats().allocated_bytes.all.peak; }
  std::int64_t peak_reserved_bytes() const { return allocator_.stats().reserved_bytes.all.peak; }
  void reset_peaks() { allocator_.reset_peak_stats(); }
  const std::optional<core::OutOfMemory>& oom() const { return oom_; }
  const core::CachingAllocator& allocator() const { return allocator_; }
  // The split of reserved bytes when they last rose to their peak (reset_peaks does not reset it:
  // it is the whole run's).
  const core::PeakMemoryBreakdown& peak_breakdown() const { return peak_breakdown_; }

  // Moves the timeline points recorded since the last call (memory.csv) up to `through_ns` (all
  // by default), in time order, to `out`; the internal buffer keeps its capacity.
  void take_timeline(std::vector<core::MemoryPoint>& out, std::int64_t through_ns = INT64_MAX);

  // The peak breakdown and allocator retries as they stood at a past time, for a world that
  // stops at a time this rank has run past (ranks run apart: World's EventOrder). Kept from
  // keep_history() on, each change with its time, and dropped up to forget_history_through().
  void keep_history() { keeps_history_ = true; }
  void forget_history_through(TimeNs time_ns);
  core::PeakMemoryBreakdown peak_breakdown_at(TimeNs time_ns) const { return state_at(time_ns).peak; }
  std::int64_t alloc_retries_at(TimeNs time_ns) const { return state_at(time_ns).alloc_retries; }

 private:
  static core::StreamId id_of(StreamKind kind);
  void report_progress();
  void note(TimeNs now_ns);

  core::FixedCapacityDeviceMemory device_;
  core::CachingAllocator allocator_;
  const Stream* streams_[3];
  int rank_;
  bool record_timeline_;
  std::optional<core::OutOfMemory> oom_;
  std::vector<core::MemoryPoint> timeline_;
  // Per block index: its use and the bytes allocated_bytes counts for it; per use: live bytes.
  std::vector<std::pair<core::MemoryUse, std::int64_t>> block_use_;
  std::int64_t live_by_use_[core::kMemoryUses] = {};
  core::PeakMemoryBreakdown peak_breakdown_;
  void forget_block(core::BlockHandle block);
  struct State {
    TimeNs time_ns = 0;  // from when it held
    core::PeakMemoryBreakdown peak;
    std::int64_t alloc_retries = 0;
  };
  const State& state_at(TimeNs time_ns) const;
  bool keeps_history_ = false;
  State history_base_;           // the state before history_'s first change
  std::vector<State> history_;   // each change since, in time order
};

}  // namespace prefetchlab::sim
