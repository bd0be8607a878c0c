#pragma once
// Reads a samples.csv as `run` writes it (core/metrics/metrics_csv.hpp): the header
// iteration,rank,phase,wait_ns,interval_ns then optional extra columns, one row per sample.
// Strict: every problem is an InputError naming the file, the line and the column.
#include <filesystem>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"

namespace prefetchlab::core {

struct SamplesFile {
  std::filesystem::path path;
  std::vector<std::string> extra_columns;  // after interval_ns, in file order
  std::vector<TimingSample> samples;       // in file order
  std::vector<int> lines;                  // 1-based line of each sample
};

// world_size: ranks must lie in [0, world_size). Checks: the five base columns first and in
// order, extra column names [A-Za-z0-9_]+ and unique; per row: the header's field count,
// integers (iteration >= 1, rank in range, times and extras >= 0), phase forward|backward, and
// per rank iterations that never go back (replay feeds them in file order).
SamplesFile read_samples_csv(const std::filesystem::path& path, int world_size);

}  // namespace prefetchlab::core
