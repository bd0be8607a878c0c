#pragma once
// The host device's collectives between processes. Rank 0's store checks that every rank issued
// the same k-th collective (and names the rank that did not, or did not come); the data moves
//   - through shared memory when every rank is on one node (shared_memory_slots.hpp): each rank
//     writes its input to its own file, the store's answer says all have, each rank computes its
//     own output from its peers' files, and a second round trip says all have read;
//   - through the store otherwise (TCP): it receives every input and answers each rank's output.
// Either way the results are those of the threads' rendezvous, bit for bit (the same reductions
// in rank order).
#include <memory>
#include <optional>
#include <string_view>

#include "gpu_backend/device/collective_transport.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/process/shared_memory_slots.hpp"

namespace prefetchlab::gpu::host {

enum class ProcessDataPath {
  kAuto,          // shared memory when every rank is on one node, else TCP
  kSharedMemory,  // every rank must be on one node
  kTcp,
};
const char* process_data_path_name(ProcessDataPath path);
std::optional<ProcessDataPath> parse_process_data_path(std::string_view name);

class ProcessTransport final : public CollectiveTransport {
 public:
  // Throws std::invalid_argument for shared memory across nodes.
  ProcessTransport(ProcessLink& link, ProcessDataPath path);
  void run(int rank, const CollectiveCall& call) override;
  bool uses_shared_memory() const { return slots_ != nullptr; }

 private:
  void run_through_shared_memory(const CollectiveCall& call, nlohmann::json header);

  ProcessLink& link_;
  std::unique_ptr<SharedMemorySlots> slots_;  // set: data through shared memory
};

}  // namespace prefetchlab::gpu::host
