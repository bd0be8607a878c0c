#include "core/scenario/timeline_selection.hpp"

#include <algorithm>
#include <charconv>

#include "core/input/input_error.hpp"
#include "core/scenario/index_ranges.hpp"

namespace prefetchlab::core {

bool IndexSelection::contains(std::int64_t index) const {
  return all() || std::binary_search(indices.begin(), indices.end(), index);
}

std::vector<char> IndexSelection::mask(std::int64_t size) const {
  std::vector<char> out(static_cast<std::size_t>(std::max<std::int64_t>(size, 0)), all() ? 1 : 0);
  if (!all()) {
    for (const std::int64_t i : indices) {
      if (i >= 0 && i < size) out[static_cast<std::size_t>(i)] = 1;
    }
  }
  return out;
}

namespace {

// The whole number `text` (digits only), or -1.
std::int64_t parse_count(std::string_view text) {
  std::int64_t value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return -1;
  return value;
}

}  // namespace

IndexSelection read_index_selection(const YamlSection& section, std::string_view key, std::int64_t lowest,
                                    std::int64_t highest, bool allow_last, const std::string& what) {
  IndexSelection selection;
  const YAML::Node node = section.raw(key);
  if (!node || node.IsNull()) return selection;
  const std::string range = "[" + std::to_string(lowest) + ", " + std::to_string(highest) + "]";
  const std::string expected = "a list of " + what + " in " + range + ", or first:N" +
                               (allow_last ? ", or last:N" : "") + " (N >= 1)";
  if (node.IsScalar()) {
    const std::string text = node.Scalar();
    const auto colon = text.find(':');
    const std::string form = colon == std::string::npos ? "" : text.substr(0, colon);
    const std::int64_t count = colon == std::string::npos ? -1 : parse_count(text.substr(colon + 1));
    if ((form != "first" && !(allow_last && form == "last")) || count < 1) {
      section.fail(key, "is '" + text + "'", expected);
    }
    const std::int64_t n = std::min(count, highest - lowest + 1);
    for (std::int64_t i = 0; i < n; ++i) selection.indices.push_back(form == "first" ? lowest + i : highest - n + 1 + i);
    selection.text = form + ":" + std::to_string(count);
    return selection;
  }
  if (!node.IsSequence() || node.size() == 0) {
    section.fail(key, node.IsSequence() ? "is an empty list" : "is a mapping", expected);
  }
  for (const auto& item : node) {
    const std::int64_t value = item.IsScalar() ? parse_count(item.Scalar()) : -1;
    if (value < lowest || value > highest) {
      // The item's own line in a file; a --set value is reported as the command line's.
      InputLocation where = section.location(key);
      if (where.line > 0) where.line = item.Mark().line + 1;
      throw InputError(where, section.dotted(key),
                       "'" + (item.IsScalar() ? item.Scalar() : std::string("?")) + "' is not one of the " + what +
                           " of this run",
                       expected);
    }
    selection.indices.push_back(value);
  }
  std::sort(selection.indices.begin(), selection.indices.end());
  selection.indices.erase(std::unique(selection.indices.begin(), selection.indices.end()), selection.indices.end());
  selection.text = "[";
  for (std::size_t i = 0; i < selection.indices.size(); ++i) {
    if (i > 0) selection.text += ", ";
    selection.text += std::to_string(selection.indices[i]);
  }
  selection.text += "]";
  return selection;
}

std::string describe_indices(const std::vector<std::int64_t>& indices) {
  // Selections are non-negative (read_index_selection's lowest is 0).
  return index_ranges(std::vector<std::size_t>(indices.begin(), indices.end()), ",");
}

}  // namespace prefetchlab::core
