#include "core/input/yaml_section.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/input/closest_match.hpp"
#include "core/input/size_value.hpp"

namespace prefetchlab::core {
namespace {

int line_of(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

std::string describe_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return quoted_input(node.Scalar());
    default: return "an undefined value";
  }
}

std::string range_text(double min, double max) {
  auto fmt = [](double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    return s;
  };
  const bool has_max = max < 9e18 && max < std::numeric_limits<double>::max();
  if (!has_max) return ">= " + fmt(min);
  return "in [" + fmt(min) + ", " + fmt(max) + "]";
}

}  // namespace

YamlSection::YamlSection(YAML::Node node, std::shared_ptr<const YamlSource> source,
                         std::string path, int line)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)), line_(line) {
  if (!node_ || node_.IsNull()) return;
  if (!node_.IsMap()) {
    throw InputError({source_->file, line_of(node_) ? line_of(node_) : line_}, path_,
                     "is " + describe_kind(node_), "a mapping of keys to values");
  }
  // First line of each key, hashed: a mapping of n keys is checked in O(n), so a file of
  // hundreds of thousands of keys is an error in milliseconds, not a quadratic scan.
  std::unordered_map<std::string, int> first_line;
  for (const auto& entry : node_) {
    const YAML::Node key_node = entry.first;
    if (!key_node.IsScalar()) {
      throw InputError({source_->file, line_of(key_node)}, path_, "has a non-scalar key",
                       "plain key names");
    }
    const std::string key = key_node.Scalar();
    const auto [seen, inserted] = first_line.emplace(key, line_of(key_node));
    if (!inserted) {
      throw InputError({source_->file, line_of(key_node)}, dotted(key),
                       "appears twice (first on line " + std::to_string(seen->second) + ")", "each key once");
    }
    key_lines_.emplace_back(key, line_of(key_node));
  }
}

YAML::Node parse_yaml_file(const std::string& file_path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_path, ec)) {
    throw InputError({file_path, 0}, "", "file not found", "a readable YAML file");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file_path);
  } catch (const YAML::Exception& e) {
    throw InputError({file_path, e.mark.line >= 0 ? e.mark.line + 1 : 0}, "",
                     "is not valid YAML (" + e.msg + ")", "well-formed YAML");
  }
  return root;
}

YamlSection YamlSection::load_file(const std::string& file_path) {
  auto source = std::make_shared<YamlSource>();
  source->file = file_path;
  return from_node(parse_yaml_file(file_path), source);
}

YamlSection YamlSection::from_node(YAML::Node root, std::shared_ptr<const YamlSource> source) {
  if (!root || root.IsNull()) {
    throw InputError({source->file, 1}, "", "is empty", "a YAML mapping");
  }
  return YamlSection(root, std::move(source), "", 1);
}

bool YamlSection::has(std::string_view key) const {
  for (const auto& entry : key_lines_) {
    if (entry.first == key) return true;
  }
  return false;
}

std::string YamlSection::dotted(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

InputLocation YamlSection::location(std::string_view key) const {
  // A key written (or a section created) by --set is reported as coming from the command line.
  const std::string full = dotted(key);
  for (const auto& overridden : source_->overridden_keys) {
    // Also a key inside a mapping --set wrote whole (--set 'training.seq_len={uniform: [1, 2]}').
    if (overridden == full || overridden.starts_with(full + ".") || full.starts_with(overridden + ".")) {
      return {"--set " + overridden, 0};
    }
  }
  for (const auto& [overridden, origin] : source_->override_origins) {
    if (overridden == full || overridden.starts_with(full + ".")) return origin;
  }
  for (const auto& [name, line] : key_lines_) {
    if (name == key) return {source_->file, line};
  }
  return {source_->file, line_};
}

void YamlSection::fail(std::string_view key, const std::string& problem,
                       const std::string& expected, const std::string& suggestion) const {
  throw InputError(location(key), dotted(key), problem, expected, suggestion);
}

void YamlSection::mark_known(std::string_view key) const { known_.emplace(key); }

std::string YamlSection::scalar(std::string_view key, const std::string& expected) const {
  mark_known(key);
  if (!has(key)) fail(key, "is missing", expected);
  const YAML::Node value = node_[std::string(key)];
  if (!value.IsScalar()) fail(key, "is " + describe_kind(value), expected);
  return value.Scalar();
}

std::string YamlSection::closest_suggestion(const std::string& text,
                                            const std::vector<std::string>& candidates) {
  return closest_match(text, candidates);
}

bool YamlSection::require_bool(std::string_view key) const {
  const std::string text = scalar(key, "true or false");
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  fail(key, "is " + quoted_input(text), "true or false");
}

bool YamlSection::get_bool(std::string_view key, bool fallback) const {
  mark_known(key);
  return has(key) ? require_bool(key) : fallback;
}

std::int64_t YamlSection::require_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  const std::string expected = "a whole number " + range_text(static_cast<double>(min), static_cast<double>(max));
  const std::string text = scalar(key, expected);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    // Accept integral scientific notation ("1e3") as a whole number too.
    const auto count = parse_count(text);
    if (!count) fail(key, "is " + quoted_input(text), expected);
    value = *count;
  }
  if (value < min || value > max) fail(key, "is " + text + ", out of range", expected);
  return value;
}

std::int64_t YamlSection::get_int(std::string_view key, std::int64_t fallback, std::int64_t min,
                                  std::int64_t max) const {
  mark_known(key);
  return has(key) ? require_int(key, min, max) : fallback;
}

double YamlSection::require_double(std::string_view key, double min, double max) const {
  const std::string expected = "a number " + range_text(min, max);
  const std::string text = scalar(key, expected);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    fail(key, "is " + quoted_input(text), expected);
  }
  if (value < min || value > max) fail(key, "is " + text + ", out of range", expected);
  return value;
}

double YamlSection::get_double(std::string_view key, double fallback, double min,
                               double max) const {
  mark_known(key);
  return has(key) ? require_double(key, min, max) : fallback;
}

std::string YamlSection::require_string(std::string_view key) const {
  return scalar(key, "a string");
}

std::string YamlSection::get_string(std::string_view key, std::string fallback) const {
  mark_known(key);
  return has(key) ? require_string(key) : fallback;
}

std::int64_t YamlSection::require_count(std::string_view key, std::int64_t min,
                                        std::int64_t max) const {
  const std::string expected =
      "a whole number of elements " + range_text(static_cast<double>(min), static_cast<double>(max)) +
      " (e.g. 5e7 or 50000000)";
  const std::string text = scalar(key, expected);
  const auto value = parse_count(text);
  if (!value) fail(key, "is " + quoted_input(text), expected);
  if (*value < min || *value > max) fail(key, "is " + text + ", out of range", expected);
  return *value;
}

std::int64_t YamlSection::get_count(std::string_view key, std::int64_t fallback, std::int64_t min,
                                    std::int64_t max) const {
  mark_known(key);
  return has(key) ? require_count(key, min, max) : fallback;
}

std::int64_t YamlSection::require_bytes(std::string_view key) const {
  const std::string expected = "a byte size >= 0 (e.g. 80GiB, 8e10 or 80000000000)";
  const std::string text = scalar(key, expected);
  const auto value = parse_bytes(text);
  if (!value) fail(key, "is " + quoted_input(text), expected);
  return *value;
}

std::int64_t YamlSection::get_bytes(std::string_view key, std::int64_t fallback) const {
  mark_known(key);
  return has(key) ? require_bytes(key) : fallback;
}

YamlSection YamlSection::section(std::string_view key) const {
  mark_known(key);
  if (!has(key)) return YamlSection(YAML::Node(), source_, dotted(key), location(key).line);
  return YamlSection(node_[std::string(key)], source_, dotted(key), location(key).line);
}

YAML::Node YamlSection::raw(std::string_view key) const {
  mark_known(key);
  if (!has(key)) return YAML::Node();
  return node_[std::string(key)];
}

std::vector<std::string> YamlSection::keys() const {
  std::vector<std::string> out;
  for (const auto& entry : key_lines_) out.push_back(entry.first);
  return out;
}

void YamlSection::allow_only(std::initializer_list<std::string_view> keys) const {
  for (const auto key : keys) mark_known(key);
  finish();
}

void YamlSection::finish() const {
  std::vector<std::string> known(known_.begin(), known_.end());
  for (const auto& [key, line] : key_lines_) {
    if (known_.count(key)) continue;
    // Short vocabularies are listed in full; long ones (zero: has ~60 keys) only suggest.
    constexpr std::size_t kMaxListed = 12;
    std::string expected = "no keys in this section";
    if (!known.empty() && known.size() <= kMaxListed) {
      expected = "one of: ";
      for (std::size_t i = 0; i < known.size(); ++i) expected += (i ? ", " : "") + known[i];
    } else if (!known.empty()) {
      expected = "one of the " + std::to_string(known.size()) + " keys this section accepts";
    }
    throw InputError(location(key), dotted(key), "is not a known key", expected,
                     closest_match(key, known));
  }
}

}  // namespace prefetchlab::core
