#include "sim/cost/length_costs.hpp"

#include "core/model/checkpoint_units.hpp"

namespace prefetchlab::sim {

LengthCosts length_costs(const core::ModelSpec& model, const ComputeModel& compute, std::int64_t micro_batch,
                         std::int64_t seq_len, core::DType dtype) {
  LengthCosts costs;
  costs.seq_len = seq_len;
  for (const auto& module : model.modules) {
    costs.forward_kernel_ns.push_back(compute.module_forward_kernel_ns(module, micro_batch, seq_len));
    costs.backward_kernel_ns.push_back(compute.module_backward_kernel_ns(module, micro_batch, seq_len));
    costs.activation_bytes.push_back(module.activation_bytes.at(micro_batch, seq_len));
  }
  costs.checkpoint_input_bytes = core::checkpoint_input_bytes(model, micro_batch, seq_len, dtype);
  costs.model_flops_per_gpu = 3 * model.forward_flops(micro_batch, seq_len);
  return costs;
}

}  // namespace prefetchlab::sim
