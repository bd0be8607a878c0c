#pragma once
// A DeepSpeed ds_config.json read as YAML 1.2 (JSON is a subset), so every later error can name
// the JSON file, line and key. Also checks the top-level keys against the scenario's training.
#include <filesystem>
#include <string>
#include <vector>

#include "core/zero/training_facts.hpp"
#include "core/input/json_section.hpp"  // detab_json
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// Reads `file` (a JSON object). A missing file is an InputError at `reference` (where the
// scenario names it, key `reference_key`); a syntax error names the JSON file and line.
YamlSection load_ds_config_json(const std::filesystem::path& file, const InputLocation& reference,
                                const std::string& reference_key);

// Checks and resolves the top-level keys of a ds_config other than zero_optimization:
// batch sizes and bf16/fp16 must agree with `facts` ("auto" takes the scenario's value); known
// DeepSpeed keys without effect on the simulation add a note; unknown keys are InputErrors.
// Marks zero_optimization known; the caller reads it.
void check_ds_config_top_level(const YamlSection& root, const TrainingFacts& facts,
                               std::vector<std::string>* notes);

}  // namespace prefetchlab::core
