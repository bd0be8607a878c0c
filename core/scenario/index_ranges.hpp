#pragma once
// Sorted indices (ranks, iterations, sweep points, shards) as runs of consecutive ones: "3,7-9,12"
// for Slurm's --array and messages, "3, 7-9, 12" for people.
#include <cstddef>
#include <string>
#include <vector>

namespace prefetchlab::core {

// `indices` sorted ascending, no repeats. After `limit` ranges the text ends in ", ..." (0: no
// limit).
std::string index_ranges(const std::vector<std::size_t>& indices, const std::string& separator,
                         std::size_t limit = 0);

}  // namespace prefetchlab::core
