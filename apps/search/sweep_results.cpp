#include "apps/search/sweep_results.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

#include "core/io/csv_reader.hpp"
#include "core/input/input_error.hpp"

namespace prefetchlab::core {
namespace {

constexpr const char* kMetricColumns[] = {
    "status",
    "steady_step_time_ns",
    "samples_per_second",
    "tflops_per_gpu",
    "mean_exposed_comm_ns",
    "forward_stall_ns",
    "backward_stall_ns",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_gathered_param_bytes",
    "final_bucket_numel",
};

std::string read_whole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0}, "", "cannot be read", "a sweep's results.csv");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> sweep_results_header(const SweepGrid& grid) {
  std::vector<std::string> header{"point"};
  for (const auto& key : grid.keys()) header.push_back(key.dotted);
  header.insert(header.end(), std::begin(kMetricColumns), std::end(kMetricColumns));
  return header;
}

std::vector<CsvField> sweep_result_row(std::size_t point, const std::vector<const GridValue*>& values,
                                       RunStatus status, const SummaryStats& stats) {
  std::vector<CsvField> row;
  row.reserve(1 + values.size() + std::size(kMetricColumns));
  row.emplace_back(point);
  for (const GridValue* value : values) row.emplace_back(value->text);
  row.emplace_back(run_status_name(status));
  row.emplace_back(stats.steady_step_time_ns);
  row.emplace_back(stats.samples_per_second);
  row.emplace_back(stats.tflops_per_gpu);
  row.emplace_back(stats.mean_exposed_comm_ns);
  row.emplace_back(stats.mean_forward_stall_ns);
  row.emplace_back(stats.mean_backward_stall_ns);
  row.emplace_back(stats.peak_allocated_bytes);
  row.emplace_back(stats.peak_reserved_bytes);
  row.emplace_back(stats.peak_gathered_param_bytes);
  row.emplace_back(stats.bucket_trajectory_numel.empty() ? std::int64_t{0} : stats.bucket_trajectory_numel.back());
  return row;
}

std::optional<std::size_t> parse_point_index(std::string_view cell) {
  std::size_t point = 0;
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), point);
  if (cell.empty() || error != std::errc{} || end != cell.data() + cell.size()) return std::nullopt;
  return point;
}

SweepRows read_sweep_rows(const std::filesystem::path& path) {
  const std::string text = read_whole(path);
  CsvText csv = parse_csv(text);
  SweepRows out;
  out.complete_bytes = csv.complete_bytes;
  out.torn_tail = csv.torn_tail;
  if (csv.records.empty()) return out;
  out.header = std::move(csv.records.front().fields);
  for (std::size_t r = 1; r < csv.records.size(); ++r) {
    CsvRecord& record = csv.records[r];
    const InputLocation where{path.string(), record.line};
    if (record.fields.size() != out.header.size()) {
      throw InputError(where, "", "has " + std::to_string(record.fields.size()) + " fields, the header has " +
                                      std::to_string(out.header.size()),
                       "one field per column");
    }
    const std::string& cell = record.fields.front();
    const auto point = parse_point_index(cell);
    if (!point) throw InputError(where, "point", "is '" + cell + "'", "a point index (a whole number)");
    if (!out.rows.emplace(*point, std::move(record.text)).second) {
      throw InputError(where, "point", "repeats point " + cell, "each point once");
    }
  }
  return out;
}

void check_rows_match_grid(const SweepRows& rows, const SweepGrid& grid, const std::filesystem::path& path) {
  for (const auto& [point, text] : rows.rows) {
    const InputLocation where{path.string(), 0};
    if (point >= grid.point_count()) {
      throw InputError(where, "point", "has point " + std::to_string(point) + ", the grid has " +
                                           std::to_string(grid.point_count()) + " points",
                       "rows of this sweep only");
    }
    const auto values = grid.values_at(point);
    const auto fields = parse_csv(text).records.front().fields;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (fields[k + 1] != values[k]->text) {
        throw InputError(where, grid.keys()[k].dotted,
                         "is '" + fields[k + 1] + "' on point " + std::to_string(point) + ", the grid says '" +
                             values[k]->text + "'",
                         "rows written by this sweep's grid");
      }
    }
  }
}

}  // namespace prefetchlab::core
