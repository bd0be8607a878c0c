#pragma once
// `--shard i/N`: which points of a sweep one process runs (p mod N == i), so a grid can be split
// over Slurm array tasks or GNU parallel and joined again with `prefetchlab merge`.
#include <cstddef>
#include <string>
#include <string_view>

namespace prefetchlab::core {

struct ShardSpec {
  std::size_t index = 0;  // i, from 0
  std::size_t count = 1;  // N; 1 = the whole sweep

  bool contains(std::size_t point) const { return point % count == index; }
  bool whole() const { return count == 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
  bool operator==(const ShardSpec&) const = default;
};

// Parses "i/N" with 0 <= i < N. Throws InputError located at `--shard TEXT`.
ShardSpec parse_shard_spec(std::string_view text);

}  // namespace prefetchlab::core
