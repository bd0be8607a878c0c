#pragma once
// Writes one rank's run in the torch.profiler (Kineto) schema that read_trace_file reads, so
// our own runs (the simulator's, the real backend's) and a user's real job go through one
// reader: ProfilerStep#N on the host thread, host ops as cpu_op, kernels on their streams,
// collectives as NCCL kernels carrying PyTorch's collective metadata ("Collective name",
// "In/Out msg nelems", "Group size", "dtype", "Process Group Name", "Seq").
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/trace_import/collective_kind.hpp"

namespace prefetchlab::core {

class KinetoTraceWriter {
 public:
  // Kineto's identities: the host thread is an OS (pid, tid); device events use pid = device and
  // tid = stream (7 = the default compute stream in real traces).
  static constexpr int kHostPid = 1000;
  static constexpr int kComputeStream = 7;
  static constexpr int kNcclStream = 40;

  KinetoTraceWriter(int rank, int world_size, std::string trace_name);

  void step(std::int64_t number, std::int64_t start_ns, std::int64_t duration_ns);
  void host_op(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns);
  // A Python frame as with_stack=True records it ("path/file.py(line): function"), and a CUDA
  // runtime call ("cudaEventSynchronize"), both on the host thread.
  void python_function(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns);
  void runtime(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns);
  void kernel(const std::string& name, int stream, std::int64_t start_ns, std::int64_t duration_ns);
  // `full_elements`: the whole gathered / reduced buffer; `seq`: the collective's place in its
  // group's order (the same on every rank).
  void collective(CollectiveKind kind, std::int64_t start_ns, std::int64_t duration_ns, std::int64_t full_elements,
                  int element_bytes, std::int64_t seq);

  // Atomically (temporary file + rename).
  void write(const std::filesystem::path& path) const;

 private:
  int world_size_;
  nlohmann::ordered_json doc_;
};

}  // namespace prefetchlab::core
