#pragma once
// `prefetchlab validate`: one scenario on a real device (gpu::Executor) and in the simulator,
// compared metric by metric (docs/real-backend.md).
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

CLI::App* add_validate_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
