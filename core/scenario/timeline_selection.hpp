#pragma once
// Which ranks and iterations a run's timelines keep: `output.trace_ranks` (trace.json,
// samples.csv, memory.csv) and `output.trace_iterations` (trace.json). A 70B model on 64 ranks
// writes a 1.3 GB trace; a few ranks and iterations are what a person opens anyway.
//
//   output:
//     trace_ranks: first:8          # or a list: [0, 7, 8, 1023]
//     trace_iterations: last:2      # or first:N, or a list: [3, 4]
//     timeline_budget: 50MB         # trace.json and memory.csv: whole iterations up to this size
//
// Above kLimitTimelinesAboveRanks ranks, trace_ranks defaults to the first kDefaultTraceRanks
// ranks and, unless trace_iterations is set, timeline_budget to kDefaultTimelineBudgetBytes;
// what the files leave out is said on stderr and in summary.json.
#include <cstdint>
#include <string>
#include <vector>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

inline constexpr std::int64_t kLimitTimelinesAboveRanks = 64;
inline constexpr std::int64_t kDefaultTraceRanks = 8;  // one node of 8 GPUs
inline constexpr std::int64_t kDefaultTimelineBudgetBytes = 200'000'000;

// A set of ranks or iterations; empty `indices` = every one.
struct IndexSelection {
  std::vector<std::int64_t> indices;  // sorted, unique
  std::string text;                   // as written or defaulted ("first:8", "[0, 5]"); "" = all

  bool all() const { return indices.empty(); }
  bool contains(std::int64_t index) const;
  // A byte per index in [0, size): 1 where selected (every index when all()).
  std::vector<char> mask(std::int64_t size) const;
};

// Reads `key` of `section`: a non-empty list of whole numbers in [lowest, highest], or
// "first:N" (N >= 1; capped at the count), or, with `allow_last`, "last:N". Absent = all.
// Throws InputError naming the file, the line, the key and the expected form.
IndexSelection read_index_selection(const YamlSection& section, std::string_view key, std::int64_t lowest,
                                    std::int64_t highest, bool allow_last, const std::string& what);

// "ranks 0-7,12 of 1024": runs of consecutive indices joined, for messages.
std::string describe_indices(const std::vector<std::int64_t>& indices);

}  // namespace prefetchlab::core
