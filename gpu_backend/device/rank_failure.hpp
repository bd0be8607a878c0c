#pragma once
// How a run on a device group fails: the first rank that failed, what it was doing, and why.
// Every blocking point of a device (host waits, stream waits, collective rendezvous) gives up
// once a failure is recorded, so one failing rank ends the whole run instead of hanging it.
#include <stdexcept>
#include <string>

namespace prefetchlab::gpu {

enum class FailureKind {
  kError,               // an exception on a rank or in one of its kernels
  kCollectiveMismatch,  // ranks issued different collectives (a hang with NCCL)
  kTimeout,             // a rank did not reach a collective in time (stuck or gone)
  kOutOfMemory,         // the caching allocator could not serve a request
};

struct RankFailure {
  int rank = -1;
  std::string operation;  // e.g. "all_gather #12 (4096 bytes)" or "fetch of model.layers.0.mlp"
  std::string reason;
  FailureKind kind = FailureKind::kError;
  std::string message() const {
    return "rank " + std::to_string(rank) + " failed in " + operation + ": " + reason;
  }
};

// Thrown on every rank once the group has failed; carries the first failure.
class RunAborted : public std::runtime_error {
 public:
  explicit RunAborted(RankFailure failure)
      : std::runtime_error(failure.message()), failure_(std::move(failure)) {}
  const RankFailure& failure() const { return failure_; }

 private:
  RankFailure failure_;
};

}  // namespace prefetchlab::gpu
