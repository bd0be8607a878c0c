#include "sim/ranks/rank_memory.hpp"

#include <algorithm>
#include <stdexcept>

namespace prefetchlab::sim {

RankMemory::RankMemory(std::int64_t capacity_bytes, std::int64_t held_elsewhere_bytes,
                       const core::AllocatorOptions& options, const Stream* const (&streams)[3], int rank,
                       bool record_timeline)
    : device_(static_cast<std::uint64_t>(capacity_bytes), static_cast<std::uint64_t>(held_elsewhere_bytes)),
      allocator_(device_, options),
      streams_{streams[0], streams[1], streams[2]},
      rank_(rank),
      record_timeline_(record_timeline) {}

core::StreamId RankMemory::id_of(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute: return 0;
    case StreamKind::kAllGather: return 1;
    case StreamKind::kReduceScatter: return 2;
    case StreamKind::kNccl: break;
  }
  throw std::logic_error("no memory pool for the NCCL stream");
}

// Streams count operations; those counts are the allocator's stream points. malloc() acts on
// what completed (process_events) before it searches the pools.
void RankMemory::report_progress() {
  for (int i = 0; i < 3; ++i) {
    const auto id = static_cast<core::StreamId>(i);
    allocator_.note_enqueued(id, streams_[i]->enqueued_ops());
    allocator_.note_completed(id, streams_[i]->completed_ops());
  }
}

void RankMemory::note(TimeNs now_ns) {
  if (!record_timeline_) return;
  const std::int64_t allocated = allocated_bytes();
  const std::int64_t reserved = reserved_bytes();
  if (!timeline_.empty() && timeline_.back().time_ns == now_ns) {
    timeline_.back().allocated_bytes = allocated;
    timeline_.back().reserved_bytes = reserved;
    return;
  }
  timeline_.push_back({now_ns, rank_, allocated, reserved});
}

std::optional<core::BlockHandle> RankMemory::allocate(std::int64_t bytes, StreamKind stream, TimeNs now_ns,
                                                      core::MemoryUse use) {
  report_progress();
  const std::int64_t peak_before = peak_reserved_bytes();
  const std::int64_t retries_before = allocator_.stats().num_alloc_retries;
  core::MallocResult result = allocator_.malloc(static_cast<std::uint64_t>(bytes), id_of(stream));
  const bool retried = allocator_.stats().num_alloc_retries != retries_before;
  if (!result) {
    oom_ = result.oom;
    if (keeps_history_ && retried) history_.push_back({now_ns, peak_breakdown_, allocator_.stats().num_alloc_retries});
    return std::nullopt;
  }
  const core::BlockHandle block = *result.block;
  const auto size = static_cast<std::int64_t>(allocator_.info(block).size_bytes);
  if (block_use_.size() <= block.index) block_use_.resize(block.index + 1);
  block_use_[block.index] = {use, size};
  live_by_use_[static_cast<int>(use)] += size;
  // A new peak of reserved bytes, or the same peak with more of it allocated (the tightest moment).
  const std::int64_t peak = std::max(peak_before, peak_breakdown_.reserved_bytes);
  if (reserved_bytes() > peak || (reserved_bytes() == peak && allocated_bytes() > peak_breakdown_.allocated_bytes)) {
    peak_breakdown_ = {rank_,
                       reserved_bytes(),
                       allocated_bytes(),
                       live_by_use_[static_cast<int>(core::MemoryUse::kModelStates)],
                       live_by_use_[static_cast<int>(core::MemoryUse::kActivations)],
                       live_by_use_[static_cast<int>(core::MemoryUse::kGatheredParams)],
                       live_by_use_[static_cast<int>(core::MemoryUse::kGradients)]};
    if (keeps_history_) history_.push_back({now_ns, peak_breakdown_, allocator_.stats().num_alloc_retries});
  } else if (keeps_history_ && retried) {
    history_.push_back({now_ns, peak_breakdown_, allocator_.stats().num_alloc_retries});
  }
  note(now_ns);
  return result.block;
}

void RankMemory::forget_history_through(TimeNs time_ns) {
  const auto end = std::find_if(history_.begin(), history_.end(), [&](const State& s) { return s.time_ns > time_ns; });
  if (end != history_.begin()) history_base_ = *(end - 1);
  history_.erase(history_.begin(), end);
}

const RankMemory::State& RankMemory::state_at(TimeNs time_ns) const {
  const auto after = std::find_if(history_.begin(), history_.end(), [&](const State& s) { return s.time_ns > time_ns; });
  return after == history_.begin() ? history_base_ : *(after - 1);
}

void RankMemory::forget_block(core::BlockHandle block) {
  const auto& [use, size] = block_use_.at(block.index);
  live_by_use_[static_cast<int>(use)] -= size;
}

void RankMemory::free(core::BlockHandle block, TimeNs now_ns) {
  forget_block(block);
  allocator_.free(block);
  note(now_ns);
}

void RankMemory::free_after(core::BlockHandle block, const Stream& used_on, TimeNs now_ns) {
  const auto id = id_of(used_on.kind());
  allocator_.note_enqueued(id, used_on.enqueued_ops());
  allocator_.record_stream(block, id);
  forget_block(block);
  allocator_.free(block);
  note(now_ns);
}

void RankMemory::take_timeline(std::vector<core::MemoryPoint>& out, std::int64_t through_ns) {
  const auto end = std::find_if(timeline_.begin(), timeline_.end(),
                                [&](const core::MemoryPoint& p) { return p.time_ns > through_ns; });
  out.insert(out.end(), timeline_.begin(), end);
  timeline_.erase(timeline_.begin(), end);
}

}  // namespace prefetchlab::sim
