#pragma once
// gpu::DeviceGroup — the ranks of one data-parallel job: one Device per rank, one communicator
// over all of them, and the group's failure state. The executor runs one host thread per rank;
// thread r uses only device(r).
#include <optional>

#include "gpu_backend/device.hpp"
#include "gpu_backend/rank_failure.hpp"

namespace prefetchlab::gpu {

class DeviceGroup {
 public:
  virtual ~DeviceGroup() = default;
  virtual int world_size() const = 0;
  virtual Device& device(int rank) = 0;
  // Records `failure` (the first one wins) and makes every device of the group give up: blocked
  // waits and rendezvous wake and throw RunAborted (on CUDA: ncclCommAbort).
  virtual void abort(const RankFailure& failure) = 0;
  virtual std::optional<RankFailure> failure() const = 0;
};

}  // namespace prefetchlab::gpu
