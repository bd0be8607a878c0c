#pragma once
// Strict reading of one YAML mapping. Every getter records the key as known; finish() turns
// any key that was never asked for into an InputError naming the closest known key, so no key
// is ever silently ignored. Every error names file, line, dotted key and the expected form.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {

// Where a YAML document came from. Keys replaced by `--set a.b=v` are reported as such.
struct YamlSource {
  std::string file;
  std::set<std::string> overridden_keys;  // dotted paths
  // Keys written into the document from elsewhere (a fidelity case's `set:`): dotted path ->
  // where the value was written, so errors on them point there.
  std::map<std::string, InputLocation> override_origins;
};

// Parses a YAML file; a missing file or a syntax error is an InputError with file and line.
YAML::Node parse_yaml_file(const std::string& file_path);

class YamlSection {
 public:
  // `node` must be a map or null (null reads as an empty map). `path` is the dotted key of the
  // section ("" for the document root); `line` is where the section starts (1-based).
  YamlSection(YAML::Node node, std::shared_ptr<const YamlSource> source, std::string path,
              int line);

  // Loads a whole file (its root must be a map). Missing or unparsable files are InputErrors.
  static YamlSection load_file(const std::string& file_path);
  static YamlSection from_node(YAML::Node root, std::shared_ptr<const YamlSource> source);

  bool has(std::string_view key) const;

  // get_*: a missing key gives the fallback. require_*: a missing key is an error.
  bool get_bool(std::string_view key, bool fallback) const;
  bool require_bool(std::string_view key) const;
  std::int64_t get_int(std::string_view key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const;
  std::int64_t require_int(std::string_view key, std::int64_t min, std::int64_t max) const;
  double get_double(std::string_view key, double fallback, double min, double max) const;
  double require_double(std::string_view key, double min, double max) const;
  std::string get_string(std::string_view key, std::string fallback) const;
  std::string require_string(std::string_view key) const;
  // Element counts: "5e7", "50000000".
  std::int64_t get_count(std::string_view key, std::int64_t fallback, std::int64_t min = 0,
                         std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::int64_t require_count(std::string_view key, std::int64_t min = 0,
                             std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  // Byte sizes: counts plus "70GiB", "80GB".
  std::int64_t get_bytes(std::string_view key, std::int64_t fallback) const;
  std::int64_t require_bytes(std::string_view key) const;

  // One of a fixed set of names, e.g. {{"none", Agreement::kNone}, ...}.
  template <class E>
  E get_enum(std::string_view key, E fallback,
             std::initializer_list<std::pair<std::string_view, E>> names) const {
    if (!has(key)) {
      mark_known(key);
      return fallback;
    }
    return require_enum(key, names);
  }
  template <class E>
  E require_enum(std::string_view key, std::initializer_list<std::pair<std::string_view, E>> names) const {
    const std::string text = scalar(key, "one of " + join_names(names));
    std::vector<std::string> candidates;
    for (const auto& [name, value] : names) {
      if (name == text) return value;
      candidates.emplace_back(name);
    }
    fail(key, "unknown value " + quoted_input(text), "one of " + join_names(names),
         closest_suggestion(text, candidates));
  }

  // A nested map; a missing key gives an empty section (so defaults apply).
  YamlSection section(std::string_view key) const;
  // The raw node for lists and free-form values; marks the key known.
  YAML::Node raw(std::string_view key) const;
  // Marks a key as known without reading it (e.g. a key handled by a different reader).
  void mark_known(std::string_view key) const;

  // Where a key is written (its own line when present, else this section's line).
  InputLocation location(std::string_view key) const;
  InputLocation location() const { return {source_->file, line_}; }
  const std::string& path() const { return path_; }
  std::string dotted(std::string_view key) const;
  const std::shared_ptr<const YamlSource>& source() const { return source_; }

  [[noreturn]] void fail(std::string_view key, const std::string& problem,
                         const std::string& expected, const std::string& suggestion = {}) const;

  // Every key present but never asked for is an error (with the closest known key).
  void finish() const;
  // Declares the section's whole vocabulary up front and rejects anything else at once, so a
  // misspelt key is reported as such rather than as "required key missing".
  void allow_only(std::initializer_list<std::string_view> keys) const;

  // Keys present in this map, in file order.
  std::vector<std::string> keys() const;

 private:
  std::string scalar(std::string_view key, const std::string& expected) const;
  static std::string closest_suggestion(const std::string& text,
                                        const std::vector<std::string>& candidates);
  template <class E>
  static std::string join_names(std::initializer_list<std::pair<std::string_view, E>> names) {
    std::string out;
    for (const auto& [name, value] : names) {
      if (!out.empty()) out += " | ";
      out += name;
    }
    return out;
  }

  YAML::Node node_;
  std::shared_ptr<const YamlSource> source_;
  std::string path_;
  int line_;
  std::vector<std::pair<std::string, int>> key_lines_;  // file order
  mutable std::set<std::string, std::less<>> known_;
};

}  // namespace prefetchlab::core
