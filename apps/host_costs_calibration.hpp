#pragma once
// `prefetchlab calibrate --from-host-costs COSTS.csv [--base PROFILE] -o PROFILE.yaml`: the
// profile's host_speed from this machine's measured host cost per torch.distributed call
// (bench/host_costs/torch_call_host_costs.py), unprofiled: the host-cost defaults' level set to
// what this machine pays (docs/fidelity.md, "Known gaps").
#include <string>

namespace prefetchlab::apps {

struct HostCostsCalibrationOptions {
  std::string costs;  // the script's CSV
  std::string base;   // bundled name or YAML path
  std::string output;
};

int run_host_costs_calibration(const HostCostsCalibrationOptions& options);

}  // namespace prefetchlab::apps
