#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab sweep SCENARIO --grid GRID.yaml -o DIR [-j N] [--resume] [--shard i/N]`: run every
// point of a grid over a scenario in parallel, one results.csv row per finished point.
CLI::App* add_sweep_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
