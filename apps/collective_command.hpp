#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab collective --hardware H --op all_gather|reduce_scatter|all_reduce --ranks N
//  [--nodes K --min-bytes B --max-bytes B --factor F --algo ring|nvls --type T]`: the collective
// cost model's predictions printed exactly as nccl-tests prints a sweep (its
// src/util.cu and doc/PERFORMANCE.md), with a line above the table naming the algorithm, protocol
// and channels chosen per size range. Its output is a valid input of `calibrate`.
CLI::App* add_collective_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
