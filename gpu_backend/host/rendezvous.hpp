#pragma once
// The host device's communicator: a rendezvous per collective. Each rank's communication
// stream posts its k-th collective; once all ranks posted the k-th, they are checked to be the
// same collective (kind, size, type, op) — NCCL would hang or corrupt otherwise — and each rank
// then moves data into its *own* output only, reading peers' inputs while every rank is parked
// in the rendezvous (so no rank thread ever writes another rank's memory). A rank that does not
// arrive within the timeout (counted from the latest arrival), or a mismatch, fails the group
// naming the rank and the collective.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpu_backend/device/collective_transport.hpp"
#include "gpu_backend/device/device.hpp"
#include "gpu_backend/device/failure_state.hpp"

namespace prefetchlab::gpu::host {

class Rendezvous final : public CollectiveTransport {
 public:
  Rendezvous(int world_size, std::chrono::milliseconds timeout, FailureState& failure);

  // Runs `call` for `rank` (on its communication stream's worker). Throws RunAborted when the
  // group fails (here or elsewhere).
  void run(int rank, const CollectiveCall& call) override;

 private:
  // A barrier over all ranks; `what` names the collective for the timeout report.
  void barrier(int rank, const CollectiveCall& call, const char* stage);

  int world_size_;
  std::chrono::milliseconds timeout_;
  FailureState& failure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<CollectiveCall> posted_;  // per rank, the current round's call
  std::vector<bool> arrived_;           // per rank, in the current barrier
  int count_ = 0;
  std::chrono::steady_clock::time_point last_arrival_;  // in the current barrier
  std::int64_t generation_ = 0;
};

}  // namespace prefetchlab::gpu::host
