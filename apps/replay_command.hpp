#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab replay --scenario FILE --samples FILE [-o OUT.csv]`: feeds a run's samples.csv
// through the scenario's controller and writes iteration,rank,bucket_numel (stdout without -o).
CLI::App* add_replay_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
