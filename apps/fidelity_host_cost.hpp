#pragma once
// The simulator's host cost of one torch-level collective call, as a `host` case of the fidelity
// corpus (bench/fidelity/) compares it with a measurement. Kept behind this one function so that
// a new host-cost model changes only its body.
#include <cstdint>
#include <string>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/hardware/nccl_tests_log.hpp"

namespace prefetchlab::apps {

// One call of torch.distributed, as measured: `call` is the torch function
// (all_gather, all_gather_into_tensor, all_reduce, reduce_scatter_tensor), `op` the NCCL
// collective it issues, `bytes_per_rank` each rank's tensor (the all-gather input, the
// reduce-scatter output, the all-reduce buffer).
struct HostQuery {
  std::string call;
  core::NcclTestsOp op = core::NcclTestsOp::kAllGather;
  int ranks = 0;
  int nodes = 1;
  std::int64_t bytes_per_rank = 0;
  // How the measurement's loop meets the device (YAML key `timing`):
  // - kSynchronized: it waits for each call to finish, so a call costs its host time plus the
  //   collective's device time;
  // - kPipelined: back-to-back calls (async_op=True) synchronised only around the loop, so the
  //   host issues the next call while the device runs the last: a call costs the larger of the two;
  // - kHostOnly: the host time alone (the figure leaves the device out).
  enum class Timing { kSynchronized, kPipelined, kHostOnly };
  Timing timing = Timing::kSynchronized;
  // The timed interval of each call also holds a torch.distributed.barrier() (YAML key
  // `barrier_per_call`), as loops that line the ranks up between calls do.
  bool barrier_per_call = false;
};

// Microseconds per call: one torch-level collective call as the host-cost model prices it (see
// fidelity_host_cost.cpp), combined with the collective's duration from the NCCL tuner model as
// the measurement's `timing` says.
double simulated_host_us(const core::HardwareProfile& profile, const core::CalibrationConstants& calibration,
                         const HostQuery& query);

}  // namespace prefetchlab::apps
