#pragma once
// The ranks of one job, each from its own trace file, and their collectives matched across
// ranks. A collective kernel's span on one rank includes waiting for the others: it starts when
// the rank reaches it and ends when the last peer has arrived and the data moved. Over the
// ranks, min(end) - max(start) is the transfer itself ("true time"); max(start) - min(start) is
// the skew (the waiting). TraceLens and HTA match the same way (docs/traces.md).
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace_import/rank_timeline.hpp"

namespace prefetchlab::core {

// One collective instance seen on several ranks.
struct MatchedCollective {
  std::int64_t step_number = 0;
  std::string process_group;  // "" = the one group assumed when the files do not say
  std::size_t index = 0;      // its position in the group's order within the step
  CollectiveKind kind = CollectiveKind::kOther;
  std::int64_t elements = -1;
  std::vector<std::size_t> ranks;  // indices into TraceSet::ranks
  std::vector<std::size_t> members;  // the RankCollective index on each of those ranks
  std::int64_t true_ns = -1;  // min(end) - max(start), >= 0; -1 when clocks are not comparable
  std::int64_t skew_ns = -1;  // max(start) - min(start)
  std::int64_t max_span_ns = 0;  // the longest per-rank span (wait + transfer)
  std::int64_t min_span_ns = 0;
};

struct TraceSet {
  std::vector<RankTimeline> ranks;  // by rank
  std::vector<MatchedCollective> matched;  // by step, group, index
  bool cross_rank_times = false;  // >= 2 ranks with comparable clocks
  std::vector<std::string> notes;  // matching limits (a group whose order diverges, unmatched counts)
};

// Reads and matches the files (one per rank). Throws InputError for any unreadable file and for
// files that cannot be one job: the same rank twice, different world sizes or backends, a rank
// outside its world, or no ProfilerStep number in common.
TraceSet load_trace_set(const std::vector<std::string>& paths, const TimelineOptions& options);

// The trace files `paths` name: a file as given, a folder as the torch.profiler traces in it
// (`*.json`, `*.json.gz`, sorted by name, as tensorboard_trace_handler writes one per rank).
// Throws InputError naming a folder that holds none.
std::vector<std::string> expand_trace_paths(const std::vector<std::string>& paths);
// The same for timelines already built (tests).
TraceSet match_trace_set(std::vector<RankTimeline> ranks);

}  // namespace prefetchlab::core
