#pragma once
// Shared helpers for tests of bad input: parse YAML text as if it came from a file, and catch
// the InputError an action must throw.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/input/input_error.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::testing {

// A YAML document read from a string, reported as coming from `file_name`.
inline core::YamlSection parse_yaml(const std::string& text, const std::string& file_name = "test.yaml") {
  auto source = std::make_shared<core::YamlSource>();
  source->file = file_name;
  return core::YamlSection::from_node(YAML::Load(text), source);
}

// Runs `action` and returns the InputError it throws (fails the test if none).
template <class F>
core::InputError expect_input_error(F action) {
  try {
    action();
  } catch (const core::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError";
  return core::InputError({}, "", "", "");
}

}  // namespace prefetchlab::testing
