#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab compare SCENARIO... [--policies P,...] [--iterations N] [-o TABLE.md]`: per
// scenario, DeepSpeed's default static bucket, the best static bucket of a x2 grid, and each
// adaptive policy, side by side (issue "Controller core").
CLI::App* add_compare_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
