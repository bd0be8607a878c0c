#include "core/hardware/host_call_costs.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"
#include "core/io/csv_reader.hpp"

namespace prefetchlab::core {
namespace {

constexpr std::string_view kExpectedFile =
    "the CSV bench/host_costs/torch_call_host_costs.py writes (columns call, bytes_per_rank, way, us_per_call)";
// A host call slower than 10 s, or faster than 0.1 us (a Python call alone takes longer), is a
// unit mistake, not a measurement.
constexpr double kMinUsPerCall = 0.1;
constexpr double kMaxUsPerCall = 1e7;
// The script writes a few dozen rows (a few kB): a file far larger is not one of its files.
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{16} << 20;

}  // namespace

std::vector<HostCallCost> parse_host_call_costs(std::string_view text, const std::string& file) {
  CsvText csv = parse_csv(text);
  if (csv.torn_tail) {
    // A last row without its line end (a file saved by an editor) is complete; one inside an
    // open quote is not.
    csv = parse_csv(std::string(text) + "\n");
  }
  if (csv.records.empty()) throw InputError({file, 0}, "", "is empty", std::string(kExpectedFile));
  if (csv.torn_tail) {
    const int line = csv.records.back().line + 1;
    throw InputError({file, line}, "", "ends inside a row (cut short, or an open quote)", std::string(kExpectedFile));
  }
  // Lines ended "\r\n" (a file saved on Windows) leave the '\r' on each record's last field.
  for (CsvRecord& record : csv.records) {
    if (!record.fields.empty() && record.fields.back().ends_with('\r')) record.fields.back().pop_back();
  }
  constexpr std::array<std::string_view, 4> kColumns = {"call", "bytes_per_rank", "way", "us_per_call"};
  std::array<std::size_t, 4> column{};
  const auto& header = csv.records.front().fields;
  for (std::size_t k = 0; k < kColumns.size(); ++k) {
    std::optional<std::size_t> at;
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == kColumns[k]) at = i;
    }
    if (!at) {
      throw InputError({file, 1}, std::string(kColumns[k]), "no such column in the header", std::string(kExpectedFile));
    }
    column[k] = *at;
  }
  std::vector<HostCallCost> rows;
  for (std::size_t r = 1; r < csv.records.size(); ++r) {
    const CsvRecord& record = csv.records[r];
    if (record.fields.size() == 1 && record.fields.front().empty()) continue;  // a blank line
    if (record.fields.size() != header.size()) {
      throw InputError({file, record.line}, "",
                       "has " + std::to_string(record.fields.size()) + " fields where the header has " +
                           std::to_string(header.size()),
                       "one field per header column");
    }
    HostCallCost row;
    row.line = record.line;
    row.call = record.fields[column[0]];
    row.way = record.fields[column[2]];
    if (row.call.empty()) throw InputError({file, record.line}, "call", "is empty", "a torch.distributed function name");
    const std::string& bytes = record.fields[column[1]];
    const auto [bytes_end, bytes_ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), row.bytes_per_rank);
    if (bytes_ec != std::errc() || bytes_end != bytes.data() + bytes.size() || row.bytes_per_rank < 0 ||
        row.bytes_per_rank > kMaxBytes) {
      throw InputError({file, record.line}, "bytes_per_rank", "is '" + bytes + "'",
                       "a whole number of bytes from 0 to 2^50 (1 PiB)");
    }
    const std::string& us = record.fields[column[3]];
    const auto [us_end, us_ec] = std::from_chars(us.data(), us.data() + us.size(), row.us_per_call);
    if (us_ec != std::errc() || us_end != us.data() + us.size() || !std::isfinite(row.us_per_call) ||
        row.us_per_call < kMinUsPerCall || row.us_per_call > kMaxUsPerCall) {
      throw InputError({file, record.line}, "us_per_call", "is '" + us + "'",
                       "microseconds per call: a number from 0.1 to 1e7");
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<HostCallCost> read_host_call_costs(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (!ec && size > kMaxFileBytes) {
    throw InputError({file.string(), 0}, "", "is " + std::to_string(size) + " bytes",
                     std::string(kExpectedFile) + ", at most 16 MiB");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError({file.string(), 0}, "", "cannot read the file", std::string(kExpectedFile));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_host_call_costs(text.str(), file.string());
}

}  // namespace prefetchlab::core
