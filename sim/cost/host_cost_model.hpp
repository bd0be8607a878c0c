#pragma once
// What a rank's host thread pays, per call, for DeepSpeed ZeRO-3's Python path and for kernel
// launches: the calibration's host terms (core/hardware/calibration.hpp names each one's source)
// divided by host_speed, rounded to the nearest ns. The rank host program (sim/ranks/rank_process.cpp)
// charges them where DeepSpeed's code runs them, relative to the fetch's two sample events:
//
//   pre-forward / pre-backward hook   pre_*_hook                          before `start`
//   fetch_sub_module                  fetch_bookkeeping (call + per param) after `start`
//     on-demand __all_gather_params   gather_round + all_gather per call   inside
//     wait loop                       per in-flight parameter waited on    inside
//   -- `end` (compute waits for the all-gather stream) --
//     prefetch __all_gather_params    gather_round + all_gather per call   after `end`
//   module's own kernels              forward_op_host / backward_op_host, per kernel
//   post-forward hook                 backward_hook_setup + post_forward_hook + release
//   post-backward hook                post_backward_hook + release
//   gradient reduce-scatter           reduce_scatter (call + per param) + its kernel launches
//   optimizer step                    optimizer_step (per param) + the update's launch
//
// So when the host starves the compute stream, the host work between `start` and `end` reads
// as fetch wait in device-event samples (as it does in DeepSpeed, whose `start` event is
// recorded near the top of _fetch_sub_module_impl), while a prefetch round's cost only
// lengthens the interval to the next fetch.
#include <cstdint>

#include "core/hardware/calibration.hpp"
#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

class HostCostModel {
 public:
  explicit HostCostModel(const core::CalibrationConstants& calibration);

  TimeNs kernel_launch_ns() const { return kernel_launch_ns_; }
  // A module's own eager work: host time per forward kernel and per backward kernel.
  TimeNs forward_op_host_ns() const { return forward_op_host_ns_; }
  TimeNs backward_op_host_ns() const { return backward_op_host_ns_; }
  TimeNs pre_forward_hook_ns() const { return pre_forward_hook_ns_; }
  TimeNs post_forward_hook_ns() const { return post_forward_hook_ns_; }
  TimeNs pre_backward_hook_ns() const { return pre_backward_hook_ns_; }
  TimeNs post_backward_hook_ns() const { return post_backward_hook_ns_; }
  TimeNs backward_hook_setup_ns() const { return backward_hook_setup_ns_; }
  // fetch_sub_module's own work for a module with `params` direct parameters (inside the
  // sample window, before any gather).
  TimeNs fetch_bookkeeping_ns(std::int64_t params) const { return fetch_call_ns_ + params * fetch_per_param_ns_; }
  TimeNs fetch_per_inflight_param_ns() const { return fetch_per_inflight_param_ns_; }
  TimeNs fetch_gather_round_ns() const { return fetch_gather_round_ns_; }
  // fetch_sub_module's whole own host time, gathers and blocking excluded: what the recordings'
  // "fetch minus its all_gather_coalesced calls and its waits" measures.
  TimeNs fetch_ns(std::int64_t params, std::int64_t inflight_waited, std::int64_t gather_rounds) const {
    return fetch_bookkeeping_ns(params) + inflight_waited * fetch_per_inflight_param_ns_ +
           gather_rounds * fetch_gather_round_ns_;
  }
  // One all_gather_coalesced call over `params` parameters (the copy-in's kernel launch is
  // charged separately, as kernel_launch_ns), and its two parts.
  TimeNs all_gather_ns(std::int64_t params) const { return allgather_call_ns_ + params * allgather_per_param_ns_; }
  TimeNs allgather_call_ns() const { return allgather_call_ns_; }
  TimeNs allgather_per_param_ns() const { return allgather_per_param_ns_; }
  // release_sub_module for a module with `params` direct parameters, `freed` of them partitioned.
  TimeNs release_ns(std::int64_t params, std::int64_t freed) const {
    return release_call_ns_ + params * release_per_param_ns_ + freed * release_per_freed_param_ns_;
  }
  // One gradient reduce-scatter of a bucket of `params` parameters (its kernels' launches apart).
  TimeNs reduce_scatter_ns(std::int64_t params) const {
    return reduce_scatter_call_ns_ + params * reduce_scatter_per_param_ns_;
  }
  // One torch.distributed.all_reduce call (the step's own are inside optimizer_step_ns).
  TimeNs all_reduce_call_ns() const { return all_reduce_call_ns_; }
  // The optimizer step's host part over a model of `params` parameters.
  TimeNs optimizer_step_ns(std::int64_t params) const { return params * optimizer_step_per_param_ns_; }

 private:
  TimeNs kernel_launch_ns_ = 0;
  TimeNs forward_op_host_ns_ = 0, backward_op_host_ns_ = 0;
  TimeNs pre_forward_hook_ns_ = 0, post_forward_hook_ns_ = 0, pre_backward_hook_ns_ = 0,
         post_backward_hook_ns_ = 0, backward_hook_setup_ns_ = 0;
  TimeNs fetch_call_ns_ = 0, fetch_per_param_ns_ = 0, fetch_per_inflight_param_ns_ = 0,
         fetch_gather_round_ns_ = 0;
  TimeNs allgather_call_ns_ = 0, allgather_per_param_ns_ = 0;
  TimeNs release_call_ns_ = 0, release_per_param_ns_ = 0, release_per_freed_param_ns_ = 0;
  TimeNs reduce_scatter_call_ns_ = 0, reduce_scatter_per_param_ns_ = 0;
  TimeNs all_reduce_call_ns_ = 0;
  TimeNs optimizer_step_per_param_ns_ = 0;
};

}  // namespace prefetchlab::sim
