#pragma once
// The grid of a sweep (`prefetchlab sweep SCENARIO --grid GRID.yaml`): a flat YAML map of dotted
// scenario keys to lists, taken as a cartesian product in the file's key order (the first key
// varies slowest). A `zip:` block (a map of keys to lists of equal length) is one axis whose keys
// vary together, placed where the block appears:
//
//   zero.stage3_prefetch_bucket_size: [1e6, 5e6, 2e7]
//   zip:
//     training.micro_batch: [1, 2, 4]
//     training.seq_len: [1024, 512, 256]
//   noise.seed: [1, 2]
//
// Points are numbered 0.. in that order (3 x 3 x 2 = 18 here). A point's values become
// `--set key=value` overrides, so they pass through exactly the scenario's own checks.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {

// One value of one key, as the grid file spelt it.
struct GridValue {
  std::string text;      // a scalar as written (`1e6`), anything else in YAML flow style
  std::string override;  // the value as YAML text for apply_override (quoted where needed)
  int line = 0;          // 1-based line in the grid file
};

// One key of the grid: its column in results.csv and where it is written.
struct GridKey {
  std::string dotted;
  int line = 0;
};

// One dimension of the product: a single key, or every key of the zip block.
struct GridAxis {
  std::vector<GridKey> keys;
  std::vector<std::vector<GridValue>> values;  // values[k][i]: key k's i-th value
  std::size_t size() const { return values.empty() ? 0 : values.front().size(); }
};

class SweepGrid {
 public:
  // Reads and checks a grid file. Throws InputError (file, line, key, expected form) for a
  // missing or malformed file, a value that is not a non-empty list, a zip block whose lists
  // differ in length, a key given twice, or a product too large to number.
  static SweepGrid load(const std::filesystem::path& file);

  const std::string& file() const { return file_; }
  const std::vector<GridAxis>& axes() const { return axes_; }
  // Every key in column order (zip keys in zip order, where the block appears).
  const std::vector<GridKey>& keys() const { return keys_; }
  std::size_t point_count() const { return point_count_; }

  // The value of each key (in keys() order) at `point` (< point_count()).
  std::vector<const GridValue*> values_at(std::size_t point) const;
  // The point's `key=value` assignments for load_scenario, in keys() order.
  std::vector<std::string> overrides_at(std::size_t point) const;

  // What makes two grids the same sweep: the axes with their keys and values as spelt
  // (not lines, comments or the file's name).
  nlohmann::ordered_json identity() const;

  // The grid location a scenario error caused by `point`'s values belongs to: an error reported
  // at `--set KEY...` (how load_scenario names an override) moves to the line of KEY's value in
  // the grid file; any other error keeps its place and names the point's values.
  InputError relocate(const InputError& error, std::size_t point) const;

 private:
  std::string file_;
  std::vector<GridAxis> axes_;
  std::vector<GridKey> keys_;
  std::size_t point_count_ = 0;
};

}  // namespace prefetchlab::core
