#pragma once
// What a ZeRO-3 step spends beside the model's own kernels, as the simulator charges it, summed
// over one optimizer step for one rank (`describe --costs` prints it; sim/ranks/rank_process.cpp
// charges each part where it happens): DeepSpeed's buffer copies around every all-gather and
// gradient reduce-scatter, and the optimizer step on the GPU or, with zero.offload_optimizer, on
// the node's CPU cores. These are durations of work, not of exposed time: the copies run on the
// all-gather and reduce-scatter streams and overlap the model's kernels where nothing waits.
#include <cstdint>

#include "core/scenario/scenario.hpp"
#include "sim/cost/compute_model.hpp"

namespace prefetchlab::sim {

struct ZeroStepCosts {
  // Per micro-batch, forward and backward fetches of every parameter (no reuse between them):
  // the rank's shard copied into the flat buffer and each gathered parameter copied out of it
  // (partition_parameters.py, AllGatherCoalescedHandle.wait).
  TimeNs gather_copies_ns = 0;
  // Per micro-batch: the gradient bucket copy, the reduce-scatter's interleave and divide, and
  // the reduced partition's copy (stage3.py __reduce_and_partition_ipg_grads).
  TimeNs gradient_copies_ns = 0;
  TimeNs optimizer_device_ns = 0;  // the GPU step's kernels (sim::ComputeModel::optimizer_step_ns)
  TimeNs optimizer_cpu_ns = 0;     // zero.offload_optimizer: CPU Adam (cpu_adam_ns)
  TimeNs optimizer_upload_ns = 0;  // zero.offload_optimizer: the updated 16-bit shard up the host link
};

// One optimizer step (grad_accum micro-batches) of one rank of `scenario`.
ZeroStepCosts zero_step_costs(const ComputeModel& compute, const core::Scenario& scenario);

// CPU Adam over one rank's shard with zero.offload_optimizer: the node's ranks step together on
// its cores, so each takes shard x ranks per node / the node's rate
// (core::CalibrationConstants::cpu_adam_node_elements_per_s).
TimeNs cpu_adam_ns(std::int64_t shard_numel, std::int64_t ranks_per_node,
                   const core::CalibrationConstants& calibration);

}  // namespace prefetchlab::sim
