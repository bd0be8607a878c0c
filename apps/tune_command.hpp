#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab tune SCENARIO... [--policy P] [--memory-cap BYTES] [--seeds N] [--budget N]
// [--deployable] [-j N] -o DIR`: searches static DeepSpeed settings or a controller's
// parameters across scenarios and seeds under a memory cap; writes controller.yaml,
// ds_config.json, report.md, tune.json and evaluations/candidates CSVs.
CLI::App* add_tune_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
