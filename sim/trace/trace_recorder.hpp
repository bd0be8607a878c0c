#pragma once
// Everything that happened on the simulated timelines, kept compactly until the run ends and
// trace.json is written (a whole-document file; docs/architecture.md,
// "Conventions").
#include <algorithm>
#include <cstddef>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/engine/event_engine.hpp"

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
  // spans before the first iteration count as iteration 1). With `max_spans` > 0, the first
  // iteration whose spans, with every earlier iteration's, exceed it is left out whole, and every
  // later one (apply_budget). `ranks`: the simulated ranks, each with a span list of its own, so
  // that ranks on threads record at once and the trace does not depend on the order they ran in.
  void limit(int ranks, std::vector<char> rank_mask, std::vector<char> iteration_mask, std::size_t max_spans) {
    ranks_.resize(static_cast<std::size_t>(ranks));
    rank_mask_ = std::move(rank_mask);
    iteration_mask_ = std::move(iteration_mask);
    max_spans_ = max_spans;
  }
  bool records_rank(int rank) const {
    return enabled_ && (rank_mask_.empty() || rank_mask_[static_cast<std::size_t>(rank)] != 0);
  }
  // The first iteration left out for the span budget, or 0 when none was (after apply_budget).
  std::int32_t first_iteration_over_budget() const { return cutoff_ == kNoCutoff ? 0 : cutoff_; }

  // From rank span.rank's own thread only.
  void add(const TraceSpan& span) {
    if (!enabled_) return;
    if (!rank_mask_.empty() && !rank_mask_[static_cast<std::size_t>(span.rank)]) return;
    const std::int32_t iteration = span.iteration < 1 ? 1 : span.iteration;
    if (!iteration_mask_.empty() && (static_cast<std::size_t>(iteration) >= iteration_mask_.size() ||
                                     !iteration_mask_[static_cast<std::size_t>(iteration)])) {
      return;
    }
    if (iteration >= cutoff_) return;  // moved only between sweeps (apply_budget)
    if (static_cast<std::size_t>(span.rank) >= ranks_.size()) ranks_.resize(static_cast<std::size_t>(span.rank) + 1);
    RankSpans& mine = ranks_[static_cast<std::size_t>(span.rank)];
    if (mine.chunks.empty() || mine.chunks.back().size() == kChunkSpans) {
      mine.chunks.emplace_back();
      mine.chunks.back().reserve(kChunkSpans);
    }
    mine.chunks.back().push_back(span);
    if (mine.per_iteration.size() <= static_cast<std::size_t>(iteration)) {
      mine.per_iteration.resize(static_cast<std::size_t>(iteration) + 1, 0);
    }
    ++mine.per_iteration[static_cast<std::size_t>(iteration)];
  }
  // Moves the budget's cutoff to the first iteration over it, counting every span kept so far
  // (no rank records while it runs): the counts only grow, so the cutoff only moves earlier, and
  // where it ends does not depend on when this ran. Spans already kept past it are not written.
  void apply_budget() {
    if (max_spans_ == 0) return;
    std::size_t iterations = 0;  // past the last iteration any rank kept a span of
    for (const RankSpans& rank : ranks_) iterations = std::max(iterations, rank.per_iteration.size());
    std::size_t total = 0;
    // Iterations with no span (output.trace_iterations left them out) count nothing.
    for (std::int32_t i = 1; i < cutoff_ && static_cast<std::size_t>(i) < iterations; ++i) {
      for (const RankSpans& rank : ranks_) {
        if (static_cast<std::size_t>(i) < rank.per_iteration.size()) total += rank.per_iteration[static_cast<std::size_t>(i)];
      }
      if (total > max_spans_) {
        cutoff_ = i;
        return;
      }
    }
  }
  // Every span kept, rank by rank, each rank's in the order recorded.
  template <class Fn>
  void for_each_span(Fn&& fn) const {
    for (const RankSpans& rank : ranks_) {
      for (const auto& chunk : rank.chunks) {
        for (const TraceSpan& span : chunk) {
          if ((span.iteration < 1 ? 1 : span.iteration) < cutoff_) fn(span);
        }
      }
    }
  }

 private:
  // Fixed-size chunks, not one growing vector: a default run records ~600k spans (29 MB), and
  // each doubling of one vector copied them all into freshly faulted pages (chunks: 7.8k page
  // faults per default run instead of 10.1k).
  static constexpr std::size_t kChunkSpans = std::size_t{1} << 14;
  static constexpr std::int32_t kNoCutoff = INT32_MAX;
  struct RankSpans {
    std::vector<std::vector<TraceSpan>> chunks;
    std::vector<std::size_t> per_iteration;  // spans kept, by iteration
  };
  bool enabled_;
  std::vector<char> rank_mask_;
  std::vector<char> iteration_mask_;
  std::size_t max_spans_ = 0;
  std::int32_t cutoff_ = kNoCutoff;
  std::vector<RankSpans> ranks_;
};

}  // namespace prefetchlab::sim
