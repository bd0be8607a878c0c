#pragma once
// What one micro-batch costs at one sequence length, per module: its kernels' times, the
// activations it saves for backward, and what a checkpointed layer keeps. A run with a
// `training.seq_len` distribution builds one per length it draws; iterations pick theirs.
#include <cstdint>
#include <vector>

#include "core/model/model_spec.hpp"
#include "sim/cost/compute_model.hpp"

namespace prefetchlab::sim {

struct LengthCosts {
  std::int64_t seq_len = 0;
  // Per module, its own work's kernels in launch order (ComputeModel::module_*_kernel_ns).
  std::vector<std::vector<TimeNs>> forward_kernel_ns;
  std::vector<std::vector<TimeNs>> backward_kernel_ns;
  std::vector<std::int64_t> activation_bytes;  // per module, saved for backward
  std::int64_t checkpoint_input_bytes = 0;     // what a checkpointed unit keeps: its input (b*s*h)
  // Model FLOPs of forward + backward on one GPU, the MFU way: 3 x forward (Korthikanti et al.
  // 2022, App. A).
  std::int64_t model_flops_per_gpu = 0;
};

LengthCosts length_costs(const core::ModelSpec& model, const ComputeModel& compute, std::int64_t micro_batch,
                         std::int64_t seq_len, core::DType dtype);

}  // namespace prefetchlab::sim
