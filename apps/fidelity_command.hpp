#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab fidelity [CASES_DIR] [--category K] [--json FILE] [--markdown FILE] [-j N]`: runs
// every case of a corpus of public, real measurements (default: the bundled bench/fidelity/)
// through the simulator and prints case, source, real, simulated and error, then the median and
// maximum absolute error per kind. Exit 0 when every case is inside its band or a still-open
// known gap; 5 when a case is outside its band without `known_gap`, or a known gap has closed;
// 2 for a malformed case file (docs/fidelity.md).
CLI::App* add_fidelity_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
