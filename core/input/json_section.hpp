#pragma once
// A JSON file read through the strict YAML reader (JSON is YAML 1.2), so its keys get the same
// checks, line numbers and "did you mean" as a scenario's. Used for DeepSpeed's ds_config.json
// and Hugging Face's config.json.
#include <filesystem>
#include <string>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// JSON allows tabs between tokens, YAML does not: tabs outside strings become spaces.
std::string detab_json(const std::string& text);

// Parses `file` (which must exist); malformed JSON is an InputError naming file and line.
YamlSection load_json_section(const std::filesystem::path& file);

}  // namespace prefetchlab::core
