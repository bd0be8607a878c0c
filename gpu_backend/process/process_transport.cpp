#include "gpu_backend/process/process_transport.hpp"

#include <cstring>
#include <stdexcept>

#include "gpu_backend/device/host_kernels.hpp"

namespace prefetchlab::gpu::host {

const char* process_data_path_name(ProcessDataPath path) {
  switch (path) {
    case ProcessDataPath::kAuto: return "auto";
    case ProcessDataPath::kSharedMemory: return "shm";
    case ProcessDataPath::kTcp: return "tcp";
  }
  return "?";
}

std::optional<ProcessDataPath> parse_process_data_path(std::string_view name) {
  for (auto path : {ProcessDataPath::kAuto, ProcessDataPath::kSharedMemory, ProcessDataPath::kTcp}) {
    if (name == process_data_path_name(path)) return path;
  }
  return std::nullopt;
}

ProcessTransport::ProcessTransport(ProcessLink& link, ProcessDataPath path) : link_(link) {
  // Every rank makes its groups in the same order, so the group's number names the same files.
  const int group = link.next_group();
  if (path == ProcessDataPath::kSharedMemory && !link.same_host()) {
    throw std::invalid_argument("--process-data shm: the ranks run on more than one node; shared memory needs them on one "
                                "(use tcp or auto)");
  }
  if (path != ProcessDataPath::kTcp && link.same_host()) {
    slots_ = std::make_unique<SharedMemorySlots>(link.job() + "-g" + std::to_string(group), link.rank(), link.world_size());
  }
}

void ProcessTransport::run(int rank, const CollectiveCall& call) {
  if (rank != link_.rank()) throw std::logic_error("a process transport carries only its own rank's collectives");
  nlohmann::json header{{"kind", collective_kind_name(call.kind)},
                        {"type", static_cast<int>(call.type)},
                        {"op", static_cast<int>(call.op)},
                        {"seq", call.seq},
                        {"send_bytes", call.send.bytes},
                        {"recv_bytes", call.recv.bytes},
                        {"what", call.describe()}};
  if (slots_) {
    run_through_shared_memory(call, std::move(header));
    return;
  }
  const auto* send = static_cast<const std::byte*>(pointer(call.send));
  const std::vector<std::byte> out = link_.collective(header, std::span(send, call.send.bytes));
  if (out.size() != call.recv.bytes) {
    throw std::runtime_error(call.describe() + ": rank 0's store answered " + std::to_string(out.size()) + " bytes for " +
                             std::to_string(call.recv.bytes));
  }
  std::memcpy(pointer(call.recv), out.data(), out.size());
}

void ProcessTransport::run_through_shared_memory(const CollectiveCall& call, nlohmann::json header) {
  const int world = link_.world_size();
  const std::uint64_t bytes = call.send.bytes;
  slots_->write_own(pointer(call.send), bytes);
  header["shared_memory"] = true;
  link_.collective(header, {});  // arrival: every rank's input is in its file
  // Every rank has created its file by now; once all hold all open (after this collective's
  // departure), the names can go (shared_memory_slots.hpp).
  const bool first = !slots_->unlinked();
  if (first) slots_->open_peers();
  const std::int64_t element = element_bytes(call.type);
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      for (int q = 0; q < world; ++q) {
        std::memcpy(static_cast<std::byte*>(pointer(call.recv)) + static_cast<std::uint64_t>(q) * bytes, slots_->slot(q, bytes), bytes);
      }
      break;
    case CollectiveKind::kReduceScatter: {
      const std::uint64_t chunk = call.recv.bytes;
      std::vector<const void*> sources;
      for (int q = 0; q < world; ++q) sources.push_back(slots_->slot(q, bytes) + static_cast<std::uint64_t>(link_.rank()) * chunk);
      reduce_into(call.type, call.op, sources, static_cast<std::int64_t>(chunk) / element, pointer(call.recv));
      break;
    }
    case CollectiveKind::kAllReduce: {
      // In place is safe: every input, this rank's too, is read from the files.
      std::vector<const void*> sources;
      for (int q = 0; q < world; ++q) sources.push_back(slots_->slot(q, bytes));
      reduce_into(call.type, call.op, sources, static_cast<std::int64_t>(bytes) / element, pointer(call.recv));
      break;
    }
  }
  // Departure: nobody overwrites its file before every rank has read it.
  link_.collective({{"kind", "barrier"},
                    {"type", 0},
                    {"op", 0},
                    {"seq", call.seq},
                    {"send_bytes", 0},
                    {"recv_bytes", 0},
                    {"what", "the end of " + call.describe()}},
                   {});
  if (first) slots_->unlink_own();
}

}  // namespace prefetchlab::gpu::host
