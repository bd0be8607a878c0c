#pragma once
// Everything that happened on the simulated timelines, kept compactly until the run ends and
// trace.json is written (a whole-document file; docs/architecture.md,
// "Conventions").
#include <cstddef>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/event_engine.hpp"

namespace prefetchlab::sim {

// Tracks of one rank (tid in the Chrome trace).
enum class Track : std::uint8_t { kHost = 0, kCompute = 1, kAllGather = 2, kReduceScatter = 3, kNccl = 4 };
inline constexpr int kTrackCount = 5;
const char* track_name(Track track);

enum class SpanKind : std::uint8_t { kKernel, kStall, kCollective, kHost };

struct TraceSpan {
  TimeNs start_ns = 0;
  TimeNs duration_ns = 0;
  std::int32_t rank = 0;
  std::int32_t label = -1;
  std::int32_t iteration = 0;
  std::int64_t collective_seq = -1;  // kCollective: index into the communicator's calls
  Track track = Track::kHost;
  SpanKind kind = SpanKind::kKernel;
  std::uint8_t phase = 0;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  // Keeps only spans of ranks and iterations whose mask byte is 1 (an empty mask keeps all;
  // spans before the first iteration count as iteration 1). With `max_spans` > 0, once that many
  // are kept, the iteration whose span would exceed it and every later one are left out whole;
  // iterations before it still in flight are finished.
  void limit(std::vector<char> rank_mask, std::vector<char> iteration_mask, std::size_t max_spans) {
    rank_mask_ = std::move(rank_mask);
    iteration_mask_ = std::move(iteration_mask);
    max_spans_ = max_spans;
  }
  bool records_rank(int rank) const {
    return enabled_ && (rank_mask_.empty() || rank_mask_[static_cast<std::size_t>(rank)] != 0);
  }
  // The first iteration left out for the span budget, or 0 when none was.
  std::int32_t first_iteration_over_budget() const { return cutoff_ == kNoCutoff ? 0 : cutoff_; }

  void add(const TraceSpan& span) {
    if (!enabled_) return;
    if (!rank_mask_.empty() && !rank_mask_[static_cast<std::size_t>(span.rank)]) return;
    const std::int32_t iteration = span.iteration < 1 ? 1 : span.iteration;
    if (!iteration_mask_.empty() && (static_cast<std::size_t>(iteration) >= iteration_mask_.size() ||
                                     !iteration_mask_[static_cast<std::size_t>(iteration)])) {
      return;
    }
    if (iteration >= cutoff_) return;
    if (max_spans_ > 0 && kept_ >= max_spans_) {
      cutoff_ = iteration;
      return;
    }
    ++kept_;
    if (chunks_.empty() || chunks_.back().size() == kChunkSpans) {
      chunks_.emplace_back();
      chunks_.back().reserve(kChunkSpans);
    }
    chunks_.back().push_back(span);
  }
  // Every span kept, in the order recorded.
  template <class Fn>
  void for_each_span(Fn&& fn) const {
    for (const auto& chunk : chunks_) {
      for (const TraceSpan& span : chunk) {
        if ((span.iteration < 1 ? 1 : span.iteration) < cutoff_) fn(span);
      }
    }
  }

 private:
  // Fixed-size chunks, not one growing vector: a default run records ~600k spans (29 MB), and
  // each doubling of one vector copied them all into freshly faulted pages (chunks: 7.8k page
  // faults per default run instead of 10.1k).
  static constexpr std::size_t kChunkSpans = std::size_t{1} << 14;
  static constexpr std::int32_t kNoCutoff = INT32_MAX;
  bool enabled_;
  std::vector<char> rank_mask_;
  std::vector<char> iteration_mask_;
  std::size_t max_spans_ = 0;
  std::size_t kept_ = 0;
  std::int32_t cutoff_ = kNoCutoff;
  std::vector<std::vector<TraceSpan>> chunks_;
};

}  // namespace prefetchlab::sim
