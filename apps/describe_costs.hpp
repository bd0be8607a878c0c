#pragma once
// `describe --costs`: where a step's compute time goes. For one transformer layer, every kernel
// its modules launch (forward and backward) with its kind, time, FLOPs and bytes, then the
// layer's and the whole model's totals by kind, priced by the simulator's compute model
// (sim/compute_model.hpp) on the scenario's (or --hardware's) GPU and calibration.
#include <cstdint>
#include <ostream>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::apps {

struct CostsInput {
  const core::ModelSpec* model = nullptr;
  const core::HardwareProfile* hardware = nullptr;
  core::CalibrationConstants calibration;
  core::DType dtype = core::DType::kBF16;
  core::AttentionImpl attention = core::AttentionImpl::kSdpa;
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 1;
};

void print_compute_costs(const CostsInput& input, std::ostream& out);

}  // namespace prefetchlab::apps
