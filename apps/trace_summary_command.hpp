#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab trace-summary TRACE... [--whole-file-step] [--json FILE]`: what a real training
// run's torch.profiler traces (one per rank) show, per step (docs/traces.md).
CLI::App* add_trace_summary_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
