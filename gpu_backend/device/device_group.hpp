#pragma once
// gpu::DeviceGroup — the ranks of one data-parallel job: one Device per rank, one communicator
// over all of them, and the group's failure state. The executor runs one host thread per rank;
// thread r uses only device(r). A group whose ranks are processes (`--launcher env`) holds only
// this process's rank; its ProcessLink reaches the others.
#include <optional>
#include <vector>

#include "gpu_backend/device/device.hpp"
#include "gpu_backend/device/rank_failure.hpp"

namespace prefetchlab::gpu {

class ProcessLink;

class DeviceGroup {
 public:
  virtual ~DeviceGroup() = default;
  virtual int world_size() const = 0;
  // The ranks whose devices this process holds: all of them, or its own (device_group.cpp).
  std::vector<int> local_ranks() const;
  // The link to the other processes' ranks; null when every rank is here.
  virtual ProcessLink* process_link() const { return nullptr; }
  // With a link: this process's rank (the link's); -1 when every rank is here.
  virtual int process_rank() const { return -1; }
  virtual Device& device(int rank) = 0;  // a local rank
  // Records `failure` (the first one wins) and makes every device of the group give up: blocked
  // waits and rendezvous wake and throw RunAborted (on CUDA: ncclCommAbort).
  virtual void abort(const RankFailure& failure) = 0;
  virtual std::optional<RankFailure> failure() const = 0;
};

}  // namespace prefetchlab::gpu
