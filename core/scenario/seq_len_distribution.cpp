#include "core/scenario/seq_len_distribution.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>

#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"
#include "core/scenario/random_stream.hpp"

namespace prefetchlab::core {
namespace {

const char* const kForms =
    "a length (4096), {uniform: [min, max]}, {choices: [l1, l2, ...], weights: [w1, w2, ...]}, "
    "{file: lengths.txt} or {packed: N}";

// The whole number `text` (optional sign, digits only), if it is one.
std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const char* begin = text.data();
  if (!text.empty() && text.front() == '+') ++begin;
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || begin == text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// Where a list item is written: its own line in a file, the command line's for a --set value.
InputLocation item_location(const YamlSection& section, std::string_view key, const YAML::Node& item) {
  InputLocation where = section.location(key);
  if (where.line > 0 && item.Mark().line >= 0) where.line = item.Mark().line + 1;
  return where;
}

std::string range(std::int64_t max_positions) {
  return "[1, " + std::to_string(max_positions) + "] (the model's positions)";
}

// A list of lengths under `key`, each in [1, max_positions]; `count` > 0 requires that many.
std::vector<std::int64_t> read_lengths(const YamlSection& section, std::string_view key, std::int64_t max_positions,
                                       const std::string& expected, std::size_t count = 0) {
  const YAML::Node node = section.raw(key);
  if (!node.IsSequence() || node.size() == 0 || (count > 0 && node.size() != count)) {
    const std::string problem = !node.IsSequence() ? (node.IsScalar() ? "is '" + node.Scalar() + "'" : "is not a list")
                                : node.size() == 0 ? "is an empty list"
                                                   : "has " + std::to_string(node.size()) + " values";
    section.fail(key, problem, expected);
  }
  std::vector<std::int64_t> lengths;
  for (const auto& item : node) {
    const auto value = item.IsScalar() ? parse_int(item.Scalar()) : std::nullopt;
    if (!value || *value < 1 || *value > max_positions) {
      throw InputError(item_location(section, key, item), section.dotted(key),
                       "'" + (item.IsScalar() ? item.Scalar() : std::string("?")) + "' is not a length in " +
                           range(max_positions),
                       expected);
    }
    lengths.push_back(*value);
  }
  return lengths;
}

std::vector<double> read_weights(const YamlSection& section, std::size_t count) {
  const std::string expected = "one weight >= 0 per choice (" + std::to_string(count) + "), not all 0";
  const YAML::Node node = section.raw("weights");
  if (!node.IsSequence() || node.size() != count) {
    section.fail("weights",
                 node.IsSequence() ? "has " + std::to_string(node.size()) + " values for " + std::to_string(count) +
                                         " choices"
                                   : "is not a list",
                 expected);
  }
  std::vector<double> weights;
  for (const auto& item : node) {
    double value = -1;
    bool ok = item.IsScalar();
    if (ok) {
      const std::string& text = item.Scalar();
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      ok = error == std::errc() && end == text.data() + text.size() && value >= 0 && value < 1e300;
    }
    if (!ok) {
      throw InputError(item_location(section, "weights", item), section.dotted("weights"),
                       "'" + (item.IsScalar() ? item.Scalar() : std::string("?")) + "' is not a weight >= 0", expected);
    }
    weights.push_back(value);
  }
  if (std::accumulate(weights.begin(), weights.end(), 0.0) <= 0) section.fail("weights", "are all 0", expected);
  return weights;
}

// One length per line; surrounding blanks (and a Windows line end) are allowed, nothing else.
std::vector<std::int64_t> read_lengths_file(const YamlSection& section, const std::filesystem::path& path,
                                            std::int64_t max_positions) {
  const std::string expected = "a text file of lengths in " + range(max_positions) + ", one per line";
  std::ifstream in(path);
  if (!in) section.fail("file", "'" + path.string() + "' cannot be read", expected);
  std::vector<std::int64_t> lengths;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    const auto last = line.find_last_not_of(" \t\r");
    const std::string text = first == std::string::npos ? "" : line.substr(first, last - first + 1);
    const auto value = parse_int(text);
    if (!value || *value < 1 || *value > max_positions) {
      throw InputError({path.string(), number}, section.dotted("file"),
                       text.empty() ? "line " + std::to_string(number) + " is empty"
                                    : "line " + std::to_string(number) + " '" + text + "' is not a length in " +
                                          range(max_positions),
                       expected);
    }
    // No run has more iterations than this, so a longer file's rest could never be read.
    if (static_cast<std::int64_t>(lengths.size()) == kMaxIterations) break;
    lengths.push_back(*value);
  }
  if (lengths.empty()) section.fail("file", "'" + path.string() + "' holds no lengths", expected);
  return lengths;
}

std::string percent(double share) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g%%", 100 * share);
  return buffer;
}

}  // namespace

bool SeqLenDistribution::varies() const {
  if (kind == SeqLenKind::kFixed || kind == SeqLenKind::kPacked) return false;
  if (kind == SeqLenKind::kChoices) {
    // A choice of weight 0 is never drawn.
    std::int64_t seen = -1;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (weights[i] <= 0) continue;
      if (seen >= 0 && values[i] != seen) return true;
      seen = values[i];
    }
    return false;
  }
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end();
}

std::int64_t SeqLenDistribution::max_len() const {
  if (kind != SeqLenKind::kChoices) return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  std::int64_t longest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (weights[i] > 0) longest = std::max(longest, values[i]);
  }
  return longest;
}

std::vector<std::int64_t> SeqLenDistribution::draw(std::uint64_t seed, std::int64_t iterations) const {
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(std::max<std::int64_t>(iterations, 0)));
  if (lengths.empty() || values.empty()) return lengths;
  switch (kind) {
    case SeqLenKind::kFixed:
    case SeqLenKind::kPacked:
      std::fill(lengths.begin(), lengths.end(), values[0]);
      break;
    case SeqLenKind::kFile:
      for (std::size_t i = 0; i < lengths.size(); ++i) lengths[i] = values[i % values.size()];
      break;
    case SeqLenKind::kUniform: {
      RandomStream stream(seed, "training/seq_len");
      const auto span = static_cast<std::uint64_t>(values[1] - values[0]) + 1;
      // Modulo bias is below span / 2^64: nothing a run of at most 1e6 draws can show.
      for (auto& length : lengths) length = values[0] + static_cast<std::int64_t>(stream.next_u64() % span);
      break;
    }
    case SeqLenKind::kChoices: {
      RandomStream stream(seed, "training/seq_len");
      const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
      for (auto& length : lengths) {
        const double u = stream.uniform() * total;
        double cumulative = 0;
        std::size_t pick = values.size();
        for (std::size_t i = 0; i < values.size(); ++i) {
          cumulative += weights[i];
          if (weights[i] > 0 && u < cumulative) {
            pick = i;
            break;
          }
        }
        // Rounding can leave u at the very top: take the last choice that can be drawn.
        if (pick == values.size()) {
          for (std::size_t i = values.size(); i-- > 0;) {
            if (weights[i] > 0) {
              pick = i;
              break;
            }
          }
        }
        length = values[pick];
      }
      break;
    }
  }
  return lengths;
}

nlohmann::json SeqLenDistribution::to_json() const {
  switch (kind) {
    case SeqLenKind::kFixed: return values.empty() ? 0 : values[0];
    case SeqLenKind::kPacked: return {{"packed", values[0]}};
    case SeqLenKind::kUniform: return {{"uniform", values}};
    case SeqLenKind::kChoices: return {{"choices", values}, {"weights", weights}};
    case SeqLenKind::kFile: return {{"file", file_as_written}, {"lines", values.size()}};
  }
  return nullptr;
}

std::string SeqLenDistribution::text() const {
  switch (kind) {
    case SeqLenKind::kFixed: return std::to_string(values.empty() ? 0 : values[0]);
    case SeqLenKind::kPacked: return "packed " + std::to_string(values[0]);
    case SeqLenKind::kUniform:
      return "uniform " + std::to_string(values[0]) + ".." + std::to_string(values[1]);
    case SeqLenKind::kChoices: {
      const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
      std::string out = "choices ";
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(values[i]) + " (" + percent(weights[i] / total) + ")";
      }
      return out;
    }
    case SeqLenKind::kFile:
      return "file " + file_as_written + " (" + std::to_string(values.size()) + " lines, cycled)";
  }
  return "";
}

SeqLenDistribution read_seq_len(const YamlSection& training, std::int64_t max_positions,
                                const std::filesystem::path& scenario_dir) {
  SeqLenDistribution d;
  const YAML::Node node = training.raw("seq_len");
  if (!node || !node.IsMap()) {
    // A number (or a mistake in one): read exactly as a fixed length always was.
    if (node && node.IsSequence()) training.fail("seq_len", "is a list", kForms);
    d.values = {training.require_int("seq_len", 1, max_positions)};
    return d;
  }
  const YamlSection form = training.section("seq_len");
  form.allow_only({"uniform", "choices", "weights", "file", "packed"});
  const std::vector<std::string> keys = form.keys();
  const auto forms = std::count_if(keys.begin(), keys.end(), [](const std::string& k) { return k != "weights"; });
  if (forms != 1) {
    training.fail("seq_len", forms == 0 ? "names no form" : "names " + std::to_string(forms) + " forms", kForms);
  }
  if (form.has("weights") && !form.has("choices")) {
    form.fail("weights", "is given without choices", "weights only beside choices: {choices: [...], weights: [...]}");
  }
  if (form.has("uniform")) {
    d.kind = SeqLenKind::kUniform;
    d.values = read_lengths(form, "uniform", max_positions, "[min, max]: two lengths in " + range(max_positions), 2);
    if (d.values[0] > d.values[1]) {
      form.fail("uniform", "has min " + std::to_string(d.values[0]) + " above max " + std::to_string(d.values[1]),
                "[min, max] with min <= max");
    }
  } else if (form.has("choices")) {
    d.kind = SeqLenKind::kChoices;
    d.values = read_lengths(form, "choices", max_positions, "a non-empty list of lengths in " + range(max_positions));
    d.weights = form.has("weights") ? read_weights(form, d.values.size()) : std::vector<double>(d.values.size(), 1.0);
  } else if (form.has("file")) {
    d.kind = SeqLenKind::kFile;
    d.file_as_written = form.require_string("file");
    std::filesystem::path path(d.file_as_written);
    if (path.is_relative()) path = scenario_dir / path;
    d.values = read_lengths_file(form, path, max_positions);
  } else {
    // Packing concatenates documents into exactly N tokens, so cost is that of a fixed N.
    // Document-boundary attention masking (no attention across packed documents, e.g.
    // flash-attn's varlen kernels) is not modelled: attention is priced over all N positions.
    d.kind = SeqLenKind::kPacked;
    d.values = {form.require_int("packed", 1, max_positions)};
  }
  form.finish();
  return d;
}

}  // namespace prefetchlab::core
