#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab sweep-status DIR`: how far a sweep has got, read from its folders: each shard's
// points with rows of a `sweep --slurm` folder (or the one folder of a plain sweep), the work
// left at the measured time per point, whether the merge has run, and the Slurm jobs' states
// when squeue answers.
CLI::App* add_sweep_status_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
