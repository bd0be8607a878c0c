#pragma once
// `describe --costs`: where a step's compute time goes. For one transformer layer, every kernel
// its modules launch (forward and backward) with its kind, time, FLOPs and bytes, then the
// layer's and the whole model's totals by kind, priced by the simulator's compute model
// (sim/cost/compute_model.hpp) on the scenario's (or --hardware's) GPU and calibration; for a scenario,
// also what ZeRO-3 spends per optimizer step beside the model's kernels (sim/cost/zero_step_costs.hpp).
#include <cstdint>
#include <ostream>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/model/model_spec.hpp"
#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {

struct CostsInput {
  const core::ModelSpec* model = nullptr;
  const core::HardwareProfile* hardware = nullptr;
  core::CalibrationConstants calibration;
  core::DType dtype = core::DType::kBF16;
  core::AttentionImpl attention = core::AttentionImpl::kSdpa;
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 1;
  // Describing a scenario: also ZeRO-3's own work per optimizer step on its cluster
  // (sim/cost/zero_step_costs.hpp). Null for a model alone.
  const core::Scenario* scenario = nullptr;
};

void print_compute_costs(const CostsInput& input, std::ostream& out);

}  // namespace prefetchlab::apps
