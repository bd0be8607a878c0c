#pragma once
// `--set key.path=value` on the command line: replaces (or adds) one value of a YAML document
// before it is read, so overrides pass through exactly the same strict checks as the file.
#include <yaml-cpp/yaml.h>

#include <string>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// `assignment` is "a.b.c=value"; value is parsed as YAML ("5e7", "true", "[1, 2]").
// The dotted key is recorded in `source.overridden_keys` so later errors point at the --set.
void apply_override(YAML::Node& root, const std::string& assignment, YamlSource& source);

// The same for a value written in another file (a fidelity case's `set:` mapping): `value` is
// copied to the dotted path; errors in writing it, and later errors on the key, are reported at
// `origin` (the `set:` entry's file and line) instead of "--set". `shown_key_prefix` goes before
// the dotted key in error messages ("set."); `root_path` is the dotted key of `root` itself in
// its source ("" for a document root, "scenario" for a mapping under that key).
void apply_override_from(YAML::Node& root, const std::string& dotted, const YAML::Node& value,
                         YamlSource& source, const InputLocation& origin, const std::string& shown_key_prefix,
                         const std::string& root_path);

}  // namespace prefetchlab::core
