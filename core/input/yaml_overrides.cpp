#include "core/input/yaml_overrides.hpp"

#include <vector>

namespace prefetchlab::core {
namespace {

// Writes `value` at the dotted path, creating sections on the way; errors are reported at `where`
// on the key `shown_key_prefix + dotted`.
void write_at_path(YAML::Node& root, const std::string& dotted, const YAML::Node& value,
                   const InputLocation& where, const std::string& shown_key_prefix,
                   const std::string& expected_form, const std::string& document_file) {
  // A document whose root is a scalar or a list has no keys to set (yaml-cpp would throw from
  // operator[] on it): the file is what is wrong, so the error names it.
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    const int line = root.Mark().line >= 0 ? root.Mark().line + 1 : 1;
    throw InputError({document_file, line}, shown_key_prefix + dotted,
                     std::string("cannot be set: the document's root is a ") +
                         (root.IsSequence() ? "list" : "scalar") + ", not a mapping",
                     "a YAML mapping of sections (model:, training:, cluster:, ...)");
  }
  std::vector<std::string> segments;
  for (std::size_t start = 0;;) {
    const auto dot = dotted.find('.', start);
    segments.push_back(dotted.substr(start, dot - start));
    if (segments.back().empty()) {
      throw InputError(where, shown_key_prefix + dotted, "has an empty path segment", expected_form);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // Walk down with reset(): plain assignment between yaml-cpp Nodes would overwrite the
  // referenced value instead of moving the cursor.
  YAML::Node cursor;
  cursor.reset(root);
  std::string walked;
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + segments[i];
    YAML::Node next = cursor[segments[i]];
    if (next.IsDefined() && !next.IsNull() && !next.IsMap()) {
      throw InputError(where, shown_key_prefix + walked, "is a value, not a section", "a path through sections");
    }
    if (!next.IsDefined() || next.IsNull()) {
      cursor[segments[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cursor[segments[i]]);
    }
    cursor.reset(next);
  }
  cursor[segments.back()] = value;
}

}  // namespace

void apply_override(YAML::Node& root, const std::string& assignment, YamlSource& source) {
  const InputLocation where{"--set " + assignment, 0};
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(where, "", "is not an assignment", "--set key.path=value");
  }
  const std::string dotted = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw InputError(where, dotted, "value is not valid YAML (" + e.msg + ")", "a YAML scalar or list");
  }
  write_at_path(root, dotted, value, where, "", "--set key.path=value", source.file);
  source.overridden_keys.insert(dotted);
}

void apply_override_from(YAML::Node& root, const std::string& dotted, const YAML::Node& value,
                         YamlSource& source, const InputLocation& origin, const std::string& shown_key_prefix,
                         const std::string& root_path) {
  write_at_path(root, dotted, YAML::Clone(value), origin, shown_key_prefix, "a dotted key such as training.micro_batch",
                source.file);
  source.override_origins[root_path.empty() ? dotted : root_path + "." + dotted] = origin;
}

}  // namespace prefetchlab::core
