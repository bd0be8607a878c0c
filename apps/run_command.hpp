#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab run SCENARIO [-o DIR] [--set key=value ...]`: simulate and write the outputs.
CLI::App* add_run_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
