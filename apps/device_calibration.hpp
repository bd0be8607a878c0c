#pragma once
// `prefetchlab calibrate --backend host|cuda`: microbenchmarks on a device group
// (gpu_backend/microbenchmarks.hpp), fitted into a hardware profile the simulator reads. Never
// runs a scenario: only kernels of given shapes, collectives, copies and launches.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpu_backend/process/process_link.hpp"
#include "process_job.hpp"

namespace prefetchlab::apps {

struct DeviceCalibrationOptions {
  std::string backend;              // host | cuda
  int ranks = 2;                    // ranks of the device group (collectives need 2+)
  std::filesystem::path base;       // the profile whose link, network and memory facts are kept
                                    // (empty: the scenario's hardware)
  std::filesystem::path scenario;   // measure its shapes and bucket sizes (empty: a default set)
  std::vector<std::string> overrides;  // --set on the scenario
  std::string output;               // profile YAML to write
  double tolerance = 0.05;          // collective fit: largest relative error per size range
  int iterations = 3;               // timed repetitions per microbenchmark
  // Largest rms relative error of a fit (GEMMs, memory-bound passes, copies) for the profile to
  // be written; unset: kGpuMaxFitError on a GPU, unchecked on the host device.
  std::optional<double> max_fit_error;
  bool force = false;  // write the profile even when a fit is above max_fit_error
  // Set (`--launcher env`): this process is one rank of `ranks`; rank 0 writes the profile.
  gpu::ProcessLink* process = nullptr;
  LauncherOptions launcher;  // its timeout and data path
};

// The GPU default of --max-fit-error.
inline constexpr double kGpuMaxFitError = 0.20;

// Prints what it measured (collectives in nccl-tests' layout) and each fit with its error per
// shape and size; writes the profile and loads it back. Throws core::InputError (exit 2),
// writing nothing, when a fit's error is above max_fit_error and not forced. Returns an exit code.
int run_device_calibration(const DeviceCalibrationOptions& options);

}  // namespace prefetchlab::apps
