#pragma once
// Everything that happened on the simulated timelines, kept compactly until the run ends and
// trace.json is written (a whole-document file; docs/architecture.md,
// "Conventions").
#include <cstddef>
#include <cstdint>
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
  void add(const TraceSpan& span) {
    if (!enabled_) return;
    if (chunks_.empty() || chunks_.back().size() == kChunkSpans) {
      chunks_.emplace_back();
      chunks_.back().reserve(kChunkSpans);
    }
    chunks_.back().push_back(span);
  }
  // Every span in the order recorded.
  template <class Fn>
  void for_each_span(Fn&& fn) const {
    for (const auto& chunk : chunks_) {
      for (const TraceSpan& span : chunk) fn(span);
    }
  }

 private:
  // Fixed-size chunks, not one growing vector: a default run records ~600k spans (29 MB), and
  // each doubling of one vector copied them all into freshly faulted pages (chunks: 7.8k page
  // faults per default run instead of 10.1k).
  static constexpr std::size_t kChunkSpans = std::size_t{1} << 14;
  bool enabled_;
  std::vector<std::vector<TraceSpan>> chunks_;
};

}  // namespace prefetchlab::sim
