#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab calibrate --from-nccl-tests LOG... --hardware BASE -o PROFILE.yaml`: reads
// nccl-tests outputs (core/hardware/nccl_tests_log.hpp), fits latency and bus bandwidth per collective
// and size range (core/hardware/collective_fit.hpp), prints the fit's error per size and writes BASE with
// a `calibration:` section holding the measured figures.
CLI::App* add_calibrate_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
