#include "sim/cost/host_cost_model.hpp"

#include <cmath>
#include <stdexcept>

namespace prefetchlab::sim {
namespace {

// A calibrated cost at this machine's speed: value / host_speed (inf: a free host).
TimeNs at_speed(std::int64_t ns, double host_speed) {
  return std::llround(static_cast<double>(ns) / host_speed);
}

}  // namespace

HostCostModel::HostCostModel(const core::CalibrationConstants& c) {
  const double s = c.host_speed;
  if (!(s > 0)) throw std::invalid_argument("HostCostModel: host_speed must be > 0 (inf: a free host)");
  kernel_launch_ns_ = at_speed(c.kernel_launch_ns, s);
  forward_op_host_ns_ = at_speed(c.forward_op_host_ns, s);
  backward_op_host_ns_ = at_speed(c.backward_op_host_ns, s);
  pre_forward_hook_ns_ = at_speed(c.host_pre_forward_hook_ns, s);
  post_forward_hook_ns_ = at_speed(c.host_post_forward_hook_ns, s);
  pre_backward_hook_ns_ = at_speed(c.host_pre_backward_hook_ns, s);
  post_backward_hook_ns_ = at_speed(c.host_post_backward_hook_ns, s);
  backward_hook_setup_ns_ = at_speed(c.host_backward_hook_setup_ns, s);
  fetch_call_ns_ = at_speed(c.host_fetch_call_ns, s);
  fetch_per_param_ns_ = at_speed(c.host_fetch_per_param_ns, s);
  fetch_per_inflight_param_ns_ = at_speed(c.host_fetch_per_inflight_param_ns, s);
  fetch_gather_round_ns_ = at_speed(c.host_fetch_gather_round_ns, s);
  allgather_call_ns_ = at_speed(c.host_allgather_call_ns, s);
  allgather_per_param_ns_ = at_speed(c.host_allgather_per_param_ns, s);
  release_call_ns_ = at_speed(c.host_release_call_ns, s);
  release_per_param_ns_ = at_speed(c.host_release_per_param_ns, s);
  release_per_freed_param_ns_ = at_speed(c.host_release_per_freed_param_ns, s);
  reduce_scatter_call_ns_ = at_speed(c.host_reduce_scatter_call_ns, s);
  reduce_scatter_per_param_ns_ = at_speed(c.host_reduce_scatter_per_param_ns, s);
  all_reduce_call_ns_ = at_speed(c.host_all_reduce_call_ns, s);
  optimizer_step_per_param_ns_ = at_speed(c.host_optimizer_step_per_param_ns, s);
}

}  // namespace prefetchlab::sim
