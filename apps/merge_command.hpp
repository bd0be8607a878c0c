#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab merge OUT_DIR SHARD_DIR... [--allow-missing]`: join the results of a sharded sweep
// into one results.csv sorted by point.
CLI::App* add_merge_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
