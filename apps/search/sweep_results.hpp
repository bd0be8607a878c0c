#pragma once
// DIR/results.csv of a sweep: one row per finished point, appended and flushed as each finishes.
// Column contract (plots/ reads it):
//   point, <each grid key, dotted, in grid order, as the grid file spelt the value>,
//   status, steady_step_time_ns, samples_per_second, tflops_per_gpu, mean_exposed_comm_ns,
//   forward_stall_ns, backward_stall_ns, peak_allocated_bytes, peak_reserved_bytes,
//   peak_gathered_param_bytes, final_bucket_numel
// Nothing in a row depends on the clock, the host, the output folder or the thread count.
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/csv_row_writer.hpp"
#include "core/metrics/metrics.hpp"
#include "apps/search/sweep_grid.hpp"

namespace prefetchlab::core {

std::vector<std::string> sweep_results_header(const SweepGrid& grid);

// One point's row. final_bucket_numel is the bucket of the last finished iteration (0 if none).
std::vector<CsvField> sweep_result_row(std::size_t point, const std::vector<const GridValue*>& values,
                                       RunStatus status, const SummaryStats& stats);

// A results.csv read back: its rows keyed by point, each kept as its exact bytes.
struct SweepRows {
  std::vector<std::string> header;          // empty when the file held no complete header
  std::map<std::size_t, std::string> rows;  // point -> the row's text, line end included
  std::size_t complete_bytes = 0;           // where the torn tail (if any) starts
  bool torn_tail = false;                   // a last row cut short by a kill mid-write
};

// Reads `path`. A torn last row is reported, not returned. Throws InputError (file, line) for a
// row with the wrong number of fields, a point that is not a whole number or appears twice.
SweepRows read_sweep_rows(const std::filesystem::path& path);

// A row's point index (its first field): a whole number, nothing else; nullopt otherwise.
std::optional<std::size_t> parse_point_index(std::string_view cell);

// Checks that each row's grid-key cells are `grid`'s values of its point and that the point is
// in the grid. Throws InputError naming `path` and the row.
void check_rows_match_grid(const SweepRows& rows, const SweepGrid& grid, const std::filesystem::path& path);

}  // namespace prefetchlab::core
