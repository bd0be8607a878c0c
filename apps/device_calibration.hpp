#pragma once
// `prefetchlab calibrate --backend host|cuda`: microbenchmarks on a device group
// (gpu_backend/microbenchmarks.hpp), fitted into a hardware profile the simulator reads. Never
// runs a scenario: only kernels of given shapes, collectives, copies and launches.
#include <filesystem>
#include <string>

namespace prefetchlab::apps {

struct DeviceCalibrationOptions {
  std::string backend;              // host | cuda
  int ranks = 2;                    // ranks of the device group (collectives need 2+)
  std::filesystem::path base;       // the profile whose link, network and memory facts are kept
  std::string output;               // profile YAML to write
  double tolerance = 0.05;          // collective fit: largest relative error per size range
  int iterations = 3;               // timed repetitions per microbenchmark
};

// Prints what it measured (collectives in nccl-tests' layout) and the fit; writes the profile
// and loads it back. Returns an exit code.
int run_device_calibration(const DeviceCalibrationOptions& options);

}  // namespace prefetchlab::apps
