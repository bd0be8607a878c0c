#pragma once
// How the host device's collectives reach the other ranks: a rendezvous of threads in one
// process (rendezvous.hpp), or rank 0's store between processes (process_transport.hpp). Either
// checks that every rank issued the same k-th collective and fails the group naming the rank
// that did not, or did not arrive in time.
#include <cstdint>
#include <string>

#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu::host {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };
const char* collective_kind_name(CollectiveKind kind);

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllGather;
  DeviceSpan send, recv;  // all-reduce: send == recv (in place)
  ElementType type = ElementType::kBF16;
  ReduceOp op = ReduceOp::kSum;
  std::int64_t seq = 0;   // the rank's collective count on this communicator, from 0
  std::string describe() const;  // "all_gather #12 (8192 bytes bf16)"
};

class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;
  // Runs `call` for `rank` on its communication stream's worker: on return, call.recv holds the
  // rank's output. Throws RunAborted when the group fails (here or elsewhere).
  virtual void run(int rank, const CollectiveCall& call) = 0;
};

}  // namespace prefetchlab::gpu::host
