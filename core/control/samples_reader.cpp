#include "core/control/samples_reader.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <fstream>
#include <map>

#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"
#include "core/metrics/metrics_csv.hpp"

namespace prefetchlab::core {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

bool is_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

SamplesFile read_samples_csv(const std::filesystem::path& path, int world_size) {
  const std::string file = path.string();
  std::ifstream in(path);
  if (!in) throw InputError({file, 0}, "", "cannot open the samples file", "a samples.csv written by `run`");
  SamplesFile out;
  out.path = path;
  const std::vector<std::string> base = SamplesCsv::base_header();
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  std::map<int, int> last_iteration;  // rank -> iteration of its previous row
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1) {
      header = split(line);
      for (std::size_t i = 0; i < base.size(); ++i) {
        if (i >= header.size() || header[i] != base[i]) {
          throw InputError({file, 1}, i < header.size() ? header[i] : "", "bad samples header",
                           "a header starting iteration,rank,phase,wait_ns,interval_ns");
        }
      }
      for (std::size_t i = base.size(); i < header.size(); ++i) {
        if (!is_name(header[i]) ||
            std::find(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(i), header[i]) !=
                header.begin() + static_cast<std::ptrdiff_t>(i)) {
          throw InputError({file, 1}, header[i], "bad or repeated extra column name",
                           "unique names of letters, digits and '_'");
        }
        out.extra_columns.push_back(header[i]);
      }
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> fields = split(line);
    if (fields.size() != header.size()) {
      throw InputError({file, line_no}, "",
                       "has " + std::to_string(fields.size()) + " fields, the header " +
                           std::to_string(header.size()),
                       "one value per header column");
    }
    auto integer = [&](std::size_t i, std::int64_t min, std::int64_t max, const std::string& what) {
      std::int64_t value = 0;
      const std::string& text = fields[i];
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        throw InputError({file, line_no}, header[i], "'" + text + "' is not an integer", what);
      }
      if (value < min || value > max) {
        throw InputError({file, line_no}, header[i], std::to_string(value) + " is out of range", what);
      }
      return value;
    };
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    TimingSample sample;
    // Bounded: a replay steps every controller through every iteration up to the last one.
    std::string iteration_form = "an iteration in [1, ";  // appended, not chained: GCC 12's -Warray-bounds
    iteration_form += std::to_string(kMaxIterations) + "]";  // misfires on `"literal" + std::string`
    sample.iteration = static_cast<int>(integer(0, 1, kMaxIterations, iteration_form));
    sample.rank = static_cast<int>(integer(1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                                           "a rank"));
    if (sample.rank < 0 || sample.rank >= world_size) {
      throw InputError({file, line_no}, "rank", "rank " + std::to_string(sample.rank) + " is outside the world",
                       "a rank in [0, " + std::to_string(world_size) + ") (nodes x gpus_per_node)");
    }
    const auto phase = parse_phase(fields[2]);
    if (!phase) throw InputError({file, line_no}, "phase", "unknown phase '" + fields[2] + "'", "forward or backward");
    sample.phase = *phase;
    sample.wait_ns = integer(3, 0, kMax, "a time in ns >= 0");
    sample.interval_ns = integer(4, 0, kMax, "a time in ns >= 0");
    for (std::size_t i = base.size(); i < fields.size(); ++i) {
      sample.extra.push_back(integer(i, 0, kMax, "a value >= 0"));
    }
    auto [it, inserted] = last_iteration.emplace(sample.rank, sample.iteration);
    if (!inserted) {
      if (sample.iteration < it->second) {
        throw InputError({file, line_no}, "iteration",
                         "iteration " + std::to_string(sample.iteration) + " after iteration " +
                             std::to_string(it->second) + " of rank " + std::to_string(sample.rank),
                         "each rank's rows in iteration order");
      }
      it->second = sample.iteration;
    }
    out.samples.push_back(std::move(sample));
    out.lines.push_back(line_no);
  }
  if (line_no == 0) throw InputError({file, 1}, "", "the samples file is empty", "a header line");
  // A run writes at least one sample per iteration, so an iteration number beyond the file's row
  // count is a damaged file, not a run: the replay would step every controller through every
  // iteration up to it, memory and time out of proportion to the file.
  const auto last = std::max_element(out.samples.begin(), out.samples.end(),
                                     [](const TimingSample& a, const TimingSample& b) { return a.iteration < b.iteration; });
  if (last != out.samples.end() && static_cast<std::size_t>(last->iteration) > out.samples.size()) {
    throw InputError({file, out.lines[static_cast<std::size_t>(last - out.samples.begin())]}, "iteration",
                     "iteration " + std::to_string(last->iteration) + " in a file of " +
                         std::to_string(out.samples.size()) + " sample rows",
                     "iterations at most the number of rows (a run writes at least one sample per iteration)");
  }
  return out;
}

}  // namespace prefetchlab::core
