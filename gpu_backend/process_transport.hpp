#pragma once
// The host device's collectives between processes: each rank's call goes to rank 0's store with
// its input; the store checks every rank issued the same collective and answers each rank's
// output (gpu_backend/process_store.hpp). Results are those of the threads' rendezvous, bit for
// bit (the same reductions in rank order).
#include "gpu_backend/collective_transport.hpp"
#include "gpu_backend/process_link.hpp"

namespace prefetchlab::gpu::host {

class ProcessTransport final : public CollectiveTransport {
 public:
  explicit ProcessTransport(ProcessLink& link) : link_(link) {}
  void run(int rank, const CollectiveCall& call) override;

 private:
  ProcessLink& link_;
};

}  // namespace prefetchlab::gpu::host
