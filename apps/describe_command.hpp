#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab describe PATH|NAME`: the module tree ZeRO-3 sees, in execution order.
// Returns the subcommand; its callback sets *exit_code.
CLI::App* add_describe_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
