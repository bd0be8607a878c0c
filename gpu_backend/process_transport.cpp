#include "gpu_backend/process_transport.hpp"

#include <cstring>
#include <stdexcept>

#include "gpu_backend/host_kernels.hpp"

namespace prefetchlab::gpu::host {

void ProcessTransport::run(int rank, const CollectiveCall& call) {
  if (rank != link_.rank()) throw std::logic_error("a process transport carries only its own rank's collectives");
  const nlohmann::json header{{"kind", collective_kind_name(call.kind)},
                              {"type", static_cast<int>(call.type)},
                              {"op", static_cast<int>(call.op)},
                              {"seq", call.seq},
                              {"send_bytes", call.send.bytes},
                              {"recv_bytes", call.recv.bytes},
                              {"what", call.describe()}};
  const auto* send = static_cast<const std::byte*>(pointer(call.send));
  const std::vector<std::byte> out = link_.collective(header, std::span(send, call.send.bytes));
  if (out.size() != call.recv.bytes) {
    throw std::runtime_error(call.describe() + ": rank 0's store answered " + std::to_string(out.size()) + " bytes for " +
                             std::to_string(call.recv.bytes));
  }
  std::memcpy(pointer(call.recv), out.data(), out.size());
}

}  // namespace prefetchlab::gpu::host
