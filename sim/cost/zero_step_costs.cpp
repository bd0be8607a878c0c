#include "sim/cost/zero_step_costs.hpp"

#include <cmath>

#include "core/hardware/hardware_derived.hpp"

namespace prefetchlab::sim {
namespace {

TimeNs at_rate(double amount, double per_s) { return static_cast<TimeNs>(std::llround(amount / per_s * 1e9)); }

}  // namespace

TimeNs cpu_adam_ns(std::int64_t shard_numel, std::int64_t ranks_per_node,
                   const core::CalibrationConstants& calibration) {
  return at_rate(static_cast<double>(shard_numel) * static_cast<double>(ranks_per_node),
                 calibration.cpu_adam_node_elements_per_s);
}

ZeroStepCosts zero_step_costs(const ComputeModel& compute, const core::Scenario& scenario) {
  ZeroStepCosts c;
  const std::int64_t ranks = scenario.cluster.world_size();
  const std::int64_t numel = scenario.model.total_numel();
  const std::int64_t shard_numel = (numel + ranks - 1) / ranks;
  const std::int64_t element_bytes = core::dtype_bytes(scenario.training.dtype);
  const std::int64_t micro_batches = scenario.training.grad_accum;
  const std::int64_t bytes = numel * element_bytes;
  if (ranks > 1) {
    // Two fetches per micro-batch (forward, backward); each copies the shard in and every
    // gathered element out.
    c.gather_copies_ns = micro_batches * 2 * (compute.copy_ns(bytes / ranks) + compute.copy_ns(bytes));
    // Bucket copy, interleave and divide over the whole gradient; the partition copy over the shard.
    c.gradient_copies_ns = micro_batches * (3 * compute.copy_ns(bytes) + compute.copy_ns(bytes / ranks));
  }
  if (scenario.zero.offload_optimizer.device == core::OffloadDevice::kNone) {
    c.optimizer_device_ns = compute.optimizer_step_ns(shard_numel);
  } else {
    c.optimizer_cpu_ns = cpu_adam_ns(shard_numel, scenario.cluster.gpus_per_node, scenario.cluster.calibration);
    if (scenario.zero.offload_param.device == core::OffloadDevice::kNone) {
      c.optimizer_upload_ns = at_rate(static_cast<double>(shard_numel * element_bytes),
                                      core::host_to_device_bytes_per_s(scenario.cluster.hardware));
    }
  }
  return c;
}

}  // namespace prefetchlab::sim
