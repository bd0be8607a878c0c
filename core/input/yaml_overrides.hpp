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

}  // namespace prefetchlab::core
