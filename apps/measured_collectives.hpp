#pragma once
// The collective part of `calibrate --backend`: each op's measured times (printed in nccl-tests'
// layout) fitted to latency + bus bandwidth, and the measured curve the simulator reads at every
// bucket size (core/hardware/measured_collective_curve.hpp). An op whose times do not grow with
// size at all (a machine too busy to measure: each rendezvous waited for a time slice) is not
// fitted and keeps the base profile's figures, said so, while the other fits stand.
#include <map>
#include <string>
#include <vector>

#include "gpu_backend/microbenchmarks.hpp"

namespace prefetchlab::apps {

struct MeasuredCollectives {
  std::map<std::string, std::string> values;  // calibration keys -> text
  std::string curves_yaml;                    // measured_collectives entries
  std::string profile_notes;                  // the profile header's lines
  std::vector<std::string> not_fitted;        // ops left at the base's figures
};

// Prints each op's table and fit; `ranks` >= 2.
MeasuredCollectives fit_measured_collectives(const gpu::MicrobenchmarkResults& results, int ranks,
                                             const std::string& backend, double tolerance);

}  // namespace prefetchlab::apps
