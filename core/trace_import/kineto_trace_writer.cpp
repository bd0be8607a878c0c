#include "core/trace_import/kineto_trace_writer.hpp"

#include "core/io/json_file.hpp"

namespace prefetchlab::core {
namespace {

double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

const char* nccl_kernel_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    case CollectiveKind::kReduceScatter: return "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    case CollectiveKind::kAllReduce: return "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    default: return "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)";
  }
}

// PyTorch's "Collective name" for the ops ZeRO-3 issues.
const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "_allgather_base";
    case CollectiveKind::kReduceScatter: return "_reduce_scatter_base";
    case CollectiveKind::kAllReduce: return "allreduce";
    default: return collective_kind_name(kind);
  }
}

const char* dtype_name(int element_bytes) {
  switch (element_bytes) {
    case 1: return "Byte";
    case 2: return "BFloat16";
    case 8: return "Double";
    default: return "Float";
  }
}

}  // namespace

KinetoTraceWriter::KinetoTraceWriter(int rank, int world_size, std::string trace_name) : world_size_(world_size) {
  doc_["schemaVersion"] = 1;
  doc_["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", world_size}};
  doc_["traceName"] = std::move(trace_name);
  doc_["displayTimeUnit"] = "ms";
  doc_["traceEvents"] = nlohmann::ordered_json::array();
  doc_["traceEvents"].push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", kHostPid}, {"tid", kHostPid},
                                 {"args", {{"name", "thread " + std::to_string(kHostPid) + " (pt_main_thread)"}}}});
}

void KinetoTraceWriter::step(std::int64_t number, std::int64_t start_ns, std::int64_t duration_ns) {
  doc_["traceEvents"].push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(number)},
                                 {"pid", kHostPid}, {"tid", kHostPid}, {"ts", us(start_ns)}, {"dur", us(duration_ns)}});
}

void KinetoTraceWriter::host_op(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns) {
  doc_["traceEvents"].push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", kHostPid}, {"tid", kHostPid},
                                 {"ts", us(start_ns)}, {"dur", us(duration_ns)}});
}

void KinetoTraceWriter::python_function(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns) {
  doc_["traceEvents"].push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", name}, {"pid", kHostPid},
                                 {"tid", kHostPid}, {"ts", us(start_ns)}, {"dur", us(duration_ns)}});
}

void KinetoTraceWriter::runtime(const std::string& name, std::int64_t start_ns, std::int64_t duration_ns) {
  doc_["traceEvents"].push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", name}, {"pid", kHostPid},
                                 {"tid", kHostPid}, {"ts", us(start_ns)}, {"dur", us(duration_ns)}});
}

void KinetoTraceWriter::kernel(const std::string& name, int stream, std::int64_t start_ns, std::int64_t duration_ns) {
  doc_["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0}, {"tid", stream},
                                 {"ts", us(start_ns)}, {"dur", us(duration_ns)},
                                 {"args", {{"device", 0}, {"stream", stream}}}});
}

void KinetoTraceWriter::collective(CollectiveKind kind, std::int64_t start_ns, std::int64_t duration_ns,
                                   std::int64_t full_elements, int element_bytes, std::int64_t seq) {
  const std::int64_t shard = full_elements / world_size_;
  // AG: In = this rank's shard, Out = the whole; RS the reverse; AR both the whole.
  const std::int64_t in = kind == CollectiveKind::kAllGather ? shard : full_elements;
  const std::int64_t out = kind == CollectiveKind::kReduceScatter ? shard : full_elements;
  doc_["traceEvents"].push_back(
      {{"ph", "X"}, {"cat", "kernel"}, {"name", nccl_kernel_name(kind)}, {"pid", 0}, {"tid", kNcclStream},
       {"ts", us(start_ns)}, {"dur", us(duration_ns)},
       {"args",
        {{"device", 0}, {"stream", kNcclStream}, {"Collective name", collective_name(kind)}, {"In msg nelems", in},
         {"Out msg nelems", out}, {"Group size", world_size_}, {"dtype", dtype_name(element_bytes)},
         {"Process Group Name", "0"}, {"Process Group Description", "default_pg"}, {"Seq", seq}}}});
}

void KinetoTraceWriter::write(const std::filesystem::path& path) const { write_text_atomically(path, doc_.dump() + "\n"); }

}  // namespace prefetchlab::core
